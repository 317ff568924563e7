"""Statistics, not speed: how often each way of pooling an effect over few seeds reads a null effect
above zero, and how often it reads a true one.

    python benchmarks/pooled_interval_rates.py [--trials 20000] [--seed 0]

The across-seed report pools each effect (a claim, a run's gain, the instrument) over the training
seeds. Its variance has two parts: the spread of the effect between seeds (tau, about 0.017 for a run's
test-set effect in the miniature: docs/experiments.md, "What pooled verdicts need") and each seed's
problem noise (a standard error of about 0.005 on 300 problems). Simulated here at those sizes, for a
family of 12 effects measured on the same seeds (the 12 runs), with no true effect (how often the 95 %
interval lies above zero, nominally 2.5 %) and with a true effect of 0.03 (power):

- ``bootstrap``: a resample of the seeds, the interval of the plug-in normal (what the two-level
  bootstrap the report used until 2026-11-29 approximates; measured with the bootstrap itself: 14 % on
  two seeds, 9-12 % on three);
- ``own t``: a t-test on each effect's own seed means (S - 1 degrees of freedom);
- ``family``: tau^2 pooled over the family (``maxk.analysis.stats.seed_spread``), its degrees of freedom;
- ``adopted``: the larger of the family's tau^2 and the effect's own, with the family's degrees of
  freedom (``maxk.analysis.stats.random_effects_interval``, the report's since 2026-11-29).

Two families: every effect with the same spread (0.017), and spreads as unequal as the 12 runs'
measured ones (0.009-0.032; an upper bound, since three seeds' estimates differ that much by chance).
The rows are computed in closed form over all trials at once; the first trials of ``adopted`` are
checked against ``random_effects_interval`` itself, so the table describes the report's code.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

SE = 0.005  #: a seed's standard error of a run's test-set effect (300 problems)
PROBLEMS = 100  #: problems per simulated seed, of sd SE * sqrt(PROBLEMS)
SHARED = np.full(12, 0.017)
MEASURED = np.array([0.009, 0.010, 0.012, 0.013, 0.015, 0.016, 0.017, 0.018, 0.020, 0.023, 0.026, 0.032])
CHECKED = 200  #: trials of ``adopted`` recomputed with ``random_effects_interval``


def _draw(rng: np.random.Generator, taus: np.ndarray, seeds: int, trials: int, effect: float) -> np.ndarray:
    """Per-problem values ``[trials, effects, seeds, problems]``: effect + a seed deviation + noise."""
    shift = effect + rng.normal(0.0, 1.0, (trials, taus.size, seeds, 1)) * taus[None, :, None, None]
    return shift + rng.normal(0.0, SE * np.sqrt(PROBLEMS), (trials, taus.size, seeds, PROBLEMS))


def above_zero(values: np.ndarray) -> dict[str, np.ndarray]:
    """For each way of pooling: whether each (trial, effect)'s 95 % interval lies above zero."""
    seeds = values.shape[2]
    means = values.mean(axis=3)
    within = (values.var(axis=3, ddof=1) / values.shape[3]).mean(axis=2)
    mean = means.mean(axis=2)
    s2 = means.var(axis=2, ddof=1)
    own = s2 - within
    df = values.shape[1] * (seeds - 1)
    family = np.maximum(0.0, own.mean(axis=1, keepdims=True))
    q_own, q_family = stats.t.ppf(0.975, seeds - 1), stats.t.ppf(0.975, df)
    return {
        "bootstrap": mean - 1.96 * np.sqrt(means.var(axis=2, ddof=0) / seeds) > 0,
        "own t": mean - q_own * np.sqrt((np.maximum(own, 0.0) + within) / seeds) > 0,
        "family": mean - q_family * np.sqrt((family + within) / seeds) > 0,
        "adopted": mean - q_family * np.sqrt((np.maximum(family, own) + within) / seeds) > 0,
    }


def _check(values: np.ndarray, adopted: np.ndarray) -> None:
    """The closed form of ``adopted`` against the report's own function, trial by trial."""
    from maxk.analysis.stats import random_effects_interval, seed_spread

    for t in range(min(CHECKED, values.shape[0])):
        members = [list(values[t, e]) for e in range(values.shape[1])]
        spread = seed_spread(members)
        got = [random_effects_interval(m, confidence=0.95, spread=spread).low > 0 for m in members]
        if got != list(adopted[t]):
            raise SystemExit(f"trial {t}: the closed form disagrees with random_effects_interval")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20_000, help="trials per cell (default: 20000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    cells: dict[str, dict[str, str]] = {}
    chunk = 2_000
    for label, taus, seeds, effect in (
        ("2 seeds, shared spread", SHARED, 2, 0.0),
        ("3 seeds, shared spread", SHARED, 3, 0.0),
        ("2 seeds, unequal spreads: mean / widest", MEASURED, 2, 0.0),
        ("power at 0.03, 2 seeds", SHARED, 2, 0.03),
        ("power at 0.03, 3 seeds", SHARED, 3, 0.03),
    ):
        hits: dict[str, np.ndarray] = {}
        done = 0
        while done < args.trials:
            n = min(chunk, args.trials - done)
            values = _draw(rng, taus, seeds, n, effect)
            rows = above_zero(values)
            if done == 0:
                _check(values, rows["adopted"])
            for name, above in rows.items():
                hits[name] = hits.get(name, 0) + above.sum(axis=0)
            done += n
        for name, count in hits.items():
            rate = count / args.trials
            text = f"{rate.mean():.1%}" + (f" / {rate.max():.1%}" if "widest" in label else "")
            cells.setdefault(name, {})[label] = text if effect == 0 else f"{rate.mean():.2f}"
    labels = list(next(iter(cells.values())))
    print("| interval | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for name, row in cells.items():
        print(f"| {name} | " + " | ".join(row[label] for label in labels) + " |")
    print(f"\n{args.trials} trials per cell, a family of {SHARED.size} effects, seed standard error {SE}; "
          f"'adopted' checked against random_effects_interval on {CHECKED} trials per cell")  # fmt: skip


if __name__ == "__main__":
    main()
