"""Statistics, not speed: how often each way of pooling an effect over few seeds reads a null effect
above zero, and how often it reads a true one.

    python benchmarks/pooled_interval_rates.py [--trials 20000] [--seed 0] [--claims]

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

``--claims``: the claims' family instead, whose members measure different metrics with different problem
noise (a seed's standard error 0.0014 for the entropy claim to 0.021 for pass@large k: ``CLAIMS_SE``, the
three-seed AVX512 tree of docs/experiments.md, "Three seeds on one base, two kernel paths"), under three
truths of the spread between seeds: none, one absolute spread for all (0.005), and a spread scaled with
each member's noise (tau^2 = 0.7 and 2 times its problem variance); against ``adopted`` (the family's
absolute tau^2) a ``scaled`` family (tau^2 = rho x the member's problem variance, rho pooled over the
family as each member's own tau^2 over its problem variance). Each cell: the mean over the members and,
after the slash, the entropy-like (least noisy) and the noisiest member; power at 3 standard errors.
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
#: the claims' seed standard errors, least noisy (grpo_lowers_entropy) first, noisiest
#: (grpo_lowers_pass_at_large_k) second (``--claims``)
CLAIMS_SE = np.array([0.0014, 0.0208, 0.0061, 0.0058, 0.0050, 0.0141, 0.0039, 0.0047, 0.0125, 0.0172])


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


def claims_rates(rng: np.random.Generator, taus: np.ndarray, seeds: int, trials: int, effect: np.ndarray):
    """``{rule: per-member rate of the 95 % interval above zero}`` for the claims-like family (``--claims``):
    members of problem noise ``CLAIMS_SE``, seed spreads ``taus``, true effects ``effect``."""
    hits: dict[str, np.ndarray] = {}
    for start in range(0, trials, 2_000):
        n = min(2_000, trials - start)
        shift = (
            effect[None, :, None, None]
            + rng.normal(0.0, 1.0, (n, taus.size, seeds, 1)) * taus[None, :, None, None]
        )
        sd = (CLAIMS_SE * np.sqrt(PROBLEMS))[None, :, None, None]
        values = shift + rng.normal(0.0, 1.0, (n, taus.size, seeds, PROBLEMS)) * sd
        means = values.mean(axis=3)
        within = (values.var(axis=3, ddof=1) / PROBLEMS).mean(axis=2)
        mean, own = means.mean(axis=2), means.var(axis=2, ddof=1) - within
        q = stats.t.ppf(0.975, taus.size * (seeds - 1))
        family = np.maximum(0.0, own.mean(axis=1, keepdims=True))
        rho = np.maximum(0.0, (own / within).mean(axis=1, keepdims=True))
        rows = {
            "adopted": mean - q * np.sqrt((np.maximum(family, own) + within) / seeds) > 0,
            "scaled": mean - q * np.sqrt((np.maximum(rho * within, own) + within) / seeds) > 0,
        }
        for name, above in rows.items():
            hits[name] = hits.get(name, 0) + above.sum(axis=0)
    return {name: count / trials for name, count in hits.items()}


def main_claims(rng: np.random.Generator, trials: int) -> None:
    """The ``--claims`` table (the module docstring)."""
    truths = {"no spread": CLAIMS_SE * 0, "one spread, 0.005": np.full(CLAIMS_SE.size, 0.005),
              "scaled, 0.7": np.sqrt(0.7) * CLAIMS_SE, "scaled, 2": np.sqrt(2.0) * CLAIMS_SE}  # fmt: skip
    print("| seeds | truth | null: adopted | null: scaled | power: adopted | power: scaled |")
    print("|---|---|---|---|---|---|")
    for seeds in (2, 3):
        for truth, taus in truths.items():
            null = claims_rates(rng, taus, seeds, trials, CLAIMS_SE * 0)
            power = claims_rates(rng, taus, seeds, trials, 3 * CLAIMS_SE)
            cell = {k: f"{r.mean():.1%} / {r[0]:.1%}, {r[1]:.1%}" for k, r in null.items()}
            pcell = {k: f"{r.mean():.2f} / {r[0]:.2f}, {r[1]:.2f}" for k, r in power.items()}
            cells = [cell["adopted"], cell["scaled"], pcell["adopted"], pcell["scaled"]]
            print(f"| {seeds} | {truth} | " + " | ".join(cells) + " |")
    print(f"\n{trials} trials per cell; each cell: mean over the {CLAIMS_SE.size} members / the least noisy, "
          "the noisiest member")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20_000, help="trials per cell (default: 20000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument("--claims", action="store_true", help="the claims-like family (the module docstring)")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.claims:
        main_claims(rng, args.trials)
        return
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
