"""The paper's claims across the seeds of ``replicates``: ``results/claims/across_seeds.{csv,md}``.

Each seed's run tests every claim on its own (``maxk.analysis.claims``: ``claims.csv``, and the
per-problem differences ``a - b`` of each tested claim, ``differences.csv``). Across the seeds, for
each claim:

- the seed's effect, interval and verdict, as its own ``claims.csv`` has them;
- ``holds_in``: the number of seeds where it holds, of the seeds where it was read (``tested_in``:
  verdict "holds" or "does not hold");
- ``effect``, ``ci_low``, ``ci_high``: the mean over seeds of each seed's mean difference, with the
  random-effects t interval (``maxk.analysis.stats.random_effects_interval``: the spread between seeds,
  pooled over the claims (``seed_spread``) or the claim's own where larger, plus each seed's problem
  noise), over the seeds it pools
  (``pooled_seeds``, listed in ``pooled_on``): where the instrument works pooled over every seed (below),
  each seed where every run the claim gates on (``Claim.gated_runs``) was measured and, off-policy,
  stayed in the first-order regime of its derivation (each seed's ``learning.csv``);
- **the instrument, pooled** (``instrument_gate``): one seed's instrument check, like its learning gate,
  is read near the edge of its power (the instrument run gains about what 300 test problems detect),
  so dropping the seeds where it failed would select the seeds where RL happened to gain more: the
  same selection on the outcome as a per-seed learning gate. So where the seeds record the instrument's
  per-problem values, it gates pooled: every part of ``pooled_instrument`` above zero, and every seed is
  pooled (its own check is listed beside it); else each gated claim's pooled effect is shown and its
  verdict is "instrument not working pooled over seeds ..." with the parts that failed. With one seed,
  without the learning tables, or where a seed's files lack those values (older runs), each seed's own
  check gates;
- **the learning gate, pooled** (``gate``): a claim compares methods that must each have raised their
  own objective. One seed's gate (``maxk.analysis.learning``: the run's test-set interval above zero)
  is read near the edge of its power, and flips with the last bits of the weights (another CPU type,
  another kernel path: docs/experiments.md); pooling only the seeds where it passed would also select
  the seeds where the run was lucky. So across seeds the gate is read like the claims: each gated run's
  test-set effect (its per-problem values, ``learned:test:{run}``) pooled over the claim's seeds with
  the random-effects interval; where one run's interval is not above zero, the claim's pooled verdict is
  "not testable: <run> did not raise <objective> pooled over seeds ...". Without the seeds'
  ``learning.csv`` (``learning`` not given), the seeds pooled are those where the claim was read on
  its own (verdict "holds" or "does not hold") and no pooled gate is read;
- ``detectable_effect``: the smallest true effect a one-sided test at the claims' Holm worst-case level
  ``alpha / m`` finds with ``analysis.claims.power`` at this number of seeds and problems (``m``: the
  claims Holm adjusts together, those read pooled, below; before 2026-11-30 every claim with an effect
  on the first seed, read or not, which made the level too strict where claims were gated):
  ``(t(1 - alpha/m) + t(power)) * se``, ``se`` the pooled effect's standard error, ``t`` the quantiles
  of its t distribution;
- ``paper_effect``: the paper's own effect, where its tables have one;
- **the pooled verdict** (``verdict``): on a claim read on at least ``MIN_POOLED_SEEDS`` seeds, the
  one-sided t-test p-value of "effect <= 0" (``pvalue``), Holm-adjusted across the claims pooled on that
  many seeds whose pooled gate passes (``pvalue_holm``); "holds" where the effect is positive and
  ``pvalue_holm < alpha``; else "undecided" where the paper reports a positive effect below the pool's
  ``detectable_effect`` (the pool could have missed the paper's own effect: "does not hold" would claim
  more than it shows; since 2026-11-29), else "does not hold". A claim pooled on one seed only has no
  pooled verdict ("read on one seed": that seed's verdict stands alone); one pooled on none, "not read"
  (every seed's instrument failed, or a run it gates on was never measured or never in its regime; each
  seed's reason follows). Beside it,
  ``holds_in`` says on how many seeds it held on its own.

Before the claims, the instrument check pooled over **every** seed (``pooled_instrument``): each of
its two parts (the instrument run's max@1 minus the base's on the claims' dataset, and its held-out
rise, last minus first), the mean of the seeds' effects with the same kind of interval (the seed
spread of the runs' test-set effects and of their held-out rises, ``INSTRUMENT_FAMILY``), beside the
number of seeds where the check passes. Each seed's verdict gates that seed's own ``claims.csv``; across
seeds the pooled check gates (above): it says whether RL raises its objective on unseen problems on
average over training runs, which one seed's check, near the edge of its power, cannot
(docs/experiments.md).

Why a t interval and not a bootstrap over seeds (``rliable``, Agarwal et al. 2021, resamples runs;
so did this module until 2026-11-29): with two or three seeds a resample of the seeds cannot see their
spread, and at the miniature's spread a null effect's interval lay above zero 14 % of the time on two
seeds and 9-12 % on three (nominally 2.5 %). The spread pooled over a family of effects gives the t
interval the degrees of freedom that two seeds alone lack (``random_effects_interval``'s docstring
gives the simulated rates).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from maxk.analysis.claims import INSTRUMENT_PARTS, NOT_TESTABLE, NOT_WORKING, READ
from maxk.analysis.learning import PARTS, fmt_interval, fmt_number
from maxk.analysis.stats import Pooled, SeedSpread, holm, random_effects_interval, seed_spread

__all__ = [
    "ACROSS_SEED_COLUMNS",
    "DIFFERENCE_COLUMNS",
    "UNDECIDED",
    "across_seeds",
    "curve_bands",
    "differences_frame",
    "learning_across_seeds",
    "pooled_gate",
    "pooled_instrument",
    "render_across_seeds",
    "render_claim_rows",
    "render_learned_in",
    "render_learning_across_seeds",
    "render_yardstick_across_seeds",
    "seed_instrument_works",
]

#: the long table of one seed's per-problem claim differences (``results/seed{seed}/claims/differences.csv``)
DIFFERENCE_COLUMNS = ("claim", "problem_id", "difference")

#: per-seed columns of ``across_seeds`` (``{name}_{seed}``)
PER_SEED = ("effect", "ci_low", "ci_high", "verdict")
#: ``across_seeds.csv``'s columns, ``{seed}`` standing for each seed of ``replicates`` in order
ACROSS_SEED_COLUMNS = (
    "id", "statement", "metric", *(f"{c}_{{seed}}" for c in PER_SEED), "tested_in", "holds_in",
    "pooled_seeds", "pooled_on", "not_pooled", "effect", "ci_low", "ci_high", "n_problems",
    "detectable_effect", "pvalue", "gate", "paper_effect", "pvalue_holm", "verdict",
)  # fmt: skip
#: the fewest seeds a claim is read on for a pooled verdict; the pooled verdicts that are not a reading
MIN_POOLED_SEEDS = 2
ONE_SEED, NOT_READ = "read on one seed", "not read"
#: a pooled claim that does not hold where the pool could not have found the paper's own effect: its
#: smallest detectable effect is above the paper's, so "does not hold" would claim more than it shows
UNDECIDED = "undecided"
#: the family of runs' effects (a part of ``PARTS``) whose seed spread each instrument part shares
INSTRUMENT_FAMILY = {"instrument": "test", "instrument_heldout": "heldout"}


def differences_frame(differences: Mapping[str, pd.Series]) -> pd.DataFrame:
    """The long table of ``evaluate_claims``'s per-problem differences: one row per (claim, problem)."""
    parts = [
        pd.DataFrame({"claim": cid, "problem_id": s.index.astype(str), "difference": s.to_numpy(dtype=float)})
        for cid, s in differences.items()
    ]
    if not parts:
        return pd.DataFrame(
            {c: pd.Series(dtype=object if c != "difference" else float) for c in DIFFERENCE_COLUMNS}
        )
    return pd.concat(parts, ignore_index=True)[list(DIFFERENCE_COLUMNS)]


def series_of(differences: pd.DataFrame, claim: str) -> np.ndarray:
    """One series' per-problem values (``claim``: its key in ``DIFFERENCE_COLUMNS``' ``claim`` column) in
    one seed's differences table; empty where the seed did not record it."""
    return differences.loc[differences["claim"] == claim, "difference"].to_numpy(dtype=float)


def seed_instrument_works(claims: pd.DataFrame) -> bool:
    """A seed's instrument works unless its claims read "instrument not working"."""
    return not (claims["verdict"] == NOT_WORKING).any()


def pooled_instrument(
    differences: Mapping[int, pd.DataFrame],
    works: Mapping[int, bool],
    *,
    confidence: float,
    spreads: Mapping[str, SeedSpread] | None = None,
    power: float | None = None,
) -> list[dict]:
    """The instrument check over every seed: for each part of ``INSTRUMENT_PARTS`` that some seed's
    differences carry, ``{"part", "what", "seeds", "works_in", "effect", "ci_low", "ci_high", "ok"}``:
    the mean over those seeds of each seed's mean difference with its random-effects interval
    (``random_effects_interval``, with the seed spread of its family in ``spreads``, keyed by the part of
    ``INSTRUMENT_FAMILY``: the runs' test-set effects for the run - base part, their held-out rises for
    the other), ``works_in`` the seeds among them whose own check passes, and with ``power``
    ``detectable`` (the smallest gain found with that power at the interval's one-sided level) and
    ``seeds_for`` (the fewest seeds that would find the gain measured so: ``Pooled.seeds_for``; None where
    it is not above zero or above 100 seeds),
    and ``ok`` when the interval is above zero. Every seed is
    pooled, working or not (``works`` gives the count beside it): the question is whether RL raises its
    objective on average over training runs. Seeds whose files predate the instrument's rows add
    nothing; no seed with a part: no entry for it."""
    out = []
    for part, what in INSTRUMENT_PARTS.items():
        per_seed = {s: series_of(f, part) for s, f in differences.items()}
        per_seed = {s: d for s, d in per_seed.items() if d.size}
        if not per_seed:
            continue
        spread = (spreads or {}).get(INSTRUMENT_FAMILY[part])
        pooled = random_effects_interval(list(per_seed.values()), confidence=confidence, spread=spread)
        tail = (1.0 - confidence) / 2.0
        members = spread.members if spread and spread.df else 1
        out.append({
            "part": part, "what": what, "seeds": sorted(per_seed),
            "works_in": sum(bool(works.get(s)) for s in per_seed),
            "effect": pooled.effect, "ci_low": pooled.low, "ci_high": pooled.high, "ok": pooled.low > 0,
            "detectable": math.nan if power is None else pooled.detectable(alpha=tail, power=power),
            "seeds_for": None if power is None else pooled.seeds_for(pooled.effect, alpha=tail, power=power,
                                                                     members=members),
        })  # fmt: skip
    return out


def learning_across_seeds(
    learning: Mapping[int, pd.DataFrame],
    differences: Mapping[int, pd.DataFrame],
    *,
    confidence: float,
    power: float | None = None,
) -> list[dict]:
    """What each run learned, seed by seed (each seed's ``learning.csv``, ``maxk.analysis.learning``),
    and pooled: for each run (first seed's order) ``{"run", "objective", "seeds": {seed: its row},
    "pooled": {part: {"effect", "ci_low", "ci_high", "seeds", "detectable"}}}``, each part of ``PARTS``
    pooled over every seed that measured it (its per-problem values in ``differences`` as
    ``learned:{part}:{run}``) with the random-effects interval, the seed spread pooled over the runs
    (``learning_spreads``): does the run raise its objective on average over training seeds.
    ``detectable`` (with ``power``; else NaN): the smallest true effect whose interval excludes zero
    with probability ``power`` (``_pooled_part``)."""

    runs = list(dict.fromkeys(r for f in learning.values() for r in f["run"]))
    spreads = learning_spreads(differences)
    out = []
    for run in runs:
        per_seed = {
            s: f.set_index("run").loc[run].to_dict() for s, f in learning.items() if run in set(f["run"])
        }
        pooled = {}
        for part in PARTS:
            key = f"learned:{part}:{run}"
            values = [series_of(d, key) for d in differences.values()]
            values = [v for v in values if v.size]
            if values:
                pooled[part] = _pooled_part(values, confidence=confidence, power=power, spread=spreads[part])
        objective = next(iter(per_seed.values()))["objective"]
        out.append({"run": run, "objective": objective, "seeds": per_seed, "pooled": pooled})
    return out


def learning_spreads(differences: Mapping[int, pd.DataFrame]) -> dict[str, SeedSpread]:
    """``{part: the seed spread of PARTS' part, pooled over every run}`` (``seed_spread``): each run's
    per-problem values ``learned:{part}:{run}`` on the seeds that recorded them, one family per part."""
    spreads = {}
    for part in PARTS:
        prefix = f"learned:{part}:"
        keys = sorted({str(k) for f in differences.values() for k in f["claim"].unique()
                       if str(k).startswith(prefix)})  # fmt: skip
        effects = [[v for v in (series_of(f, k) for f in differences.values()) if v.size] for k in keys]
        spreads[part] = seed_spread(effects)
    return spreads


def _pooled_part(
    values: Sequence[np.ndarray], *, confidence: float, power: float | None, spread: SeedSpread | None
) -> dict:
    """One part pooled over seeds (``values``: each seed's per-problem values): ``{"effect", "ci_low",
    "ci_high", "seeds", "detectable"}``, the random-effects interval with the family's ``spread``;
    ``detectable`` at the interval's one-sided level ``(1 - confidence) / 2`` (NaN without ``power``)."""
    pooled = random_effects_interval(values, confidence=confidence, spread=spread)
    tail = (1.0 - confidence) / 2.0
    detectable = math.nan if power is None else pooled.detectable(alpha=tail, power=power)
    return {"effect": pooled.effect, "ci_low": pooled.low, "ci_high": pooled.high, "seeds": pooled.seeds,
            "detectable": detectable}  # fmt: skip


def render_learning_across_seeds(
    rows: Sequence[Mapping],
    seeds: Sequence[int],
    decimals: int,
    spreads: Mapping[str, SeedSpread] | None = None,
) -> list[str]:
    """The across-seed report's per-run section (lines): each seed's test-set effect with its interval
    (bold: the run learned there) and regime, then each part pooled over the seeds; with ``spreads``
    (``learning_spreads``), a line stating each part's spread between seeds."""
    if not rows:
        return []
    paper = any(pd.notna(row.get("paper_effect")) for r in rows for row in r["seeds"].values())
    head = ["run", "own objective", *(f"seed {s}: test set" for s in seeds), *(f"pooled: {p}" for p in PARTS),
            *(["paper: run - base"] if paper else []), "off-policy regime by seed"]  # fmt: skip
    lines = [
        "## What each run learned, across seeds",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for r in rows:
        cells = [f"`{r['run']}`", r["objective"]]
        regimes = []
        for s in seeds:
            row = r["seeds"].get(s)
            if row is None or pd.isna(row.get("test_effect")):
                cells.append("not measured")
            else:
                cell = fmt_interval(row["test_effect"], row["test_ci_low"], row["test_ci_high"], decimals)
                cells.append(f"**{cell}**" if row["test_ci_low"] > 0 else cell)
            if row is not None and bool(row.get("off_policy")) and pd.notna(row.get("clamped_frac")):
                ok = row.get("regime_ok")
                state = "in" if ok is True or ok == "True" else "out" if ok is False or ok == "False" else "?"
                regimes.append(f"{s}: {state} ({float(row['clamped_frac']):.0%} clamped)")
        for part in PARTS:
            p = r["pooled"].get(part)
            pooled = fmt_interval(p["effect"], p["ci_low"], p["ci_high"], decimals) if p else ""
            pooled = f"**{pooled}**" if p and p["ci_low"] > 0 else pooled
            detectable = fmt_number(p.get("detectable"), decimals, signed=False) if p else ""
            cells.append(
                f"{pooled} ({p['seeds']} seeds{'; detectable ' + detectable if detectable else ''})"
                if p
                else "not measured"
            )
        if paper:
            effects = [
                row["paper_effect"] for row in r["seeds"].values() if pd.notna(row.get("paper_effect"))
            ]
            cells.append(fmt_number(effects[0], decimals) if effects else "not reported")
        cells.append("; ".join(regimes) or "on-policy")
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Per seed: the run's own objective on the unseen test set, run - base (bold: interval above zero, "
        "the run learned there). pooled: the mean over the seeds that measured it, with a random-effects "
        "t interval (the spread between seeds pooled over the runs, each seed's problem noise); bold: "
        "above zero (on the test set, over the seeds a claim pools, this is the claims' learning gate); "
        "detectable: the smallest true effect whose pooled interval excludes zero with the claims' "
        "power. paper: the "
        "paper's own run minus its base model at the same objective, where its tables report both "
        "(`learning.csv`: `paper_table`).",
        "",
    ]
    if spreads:
        parts = [part for part in PARTS if part in spreads]
        words = "; ".join(f"{part}: {_spread_sd(spreads[part], decimals)}" for part in parts)
        lines += [f"The runs' spread between seeds, pooled over the runs: {words}.", ""]
    return lines


def render_learned_in(rows: Sequence[Mapping], seeds: Sequence[int]) -> list[str]:
    """One line per run of ``learning_across_seeds``' ``rows``: on how many of ``seeds`` that measured its
    test set its interval there is above zero (the run learned there; which seeds), the seeds that did not
    measure it, and whether its test set pooled over them is above zero (``maxk analyze learning`` on
    several seeds; the across-seed report has no such lines)."""
    lines = []
    for r in rows:
        measured = [s for s in seeds if s in r["seeds"] and pd.notna(r["seeds"][s].get("test_effect"))]
        above = [s for s in measured if float(r["seeds"][s]["test_ci_low"]) > 0]
        words = f"- `{r['run']}` ({r['objective']}, test set): above zero on {len(above)} of {len(measured)}"
        words += " seeds" if len(measured) != 1 else " seed"
        words += f" ({', '.join(map(str, above))})" if above else ""
        unmeasured = [s for s in seeds if s not in measured]
        if unmeasured:
            words += f"; not measured on seed {', '.join(map(str, unmeasured))}"
        test = r["pooled"].get("test")
        if test:
            where = "above zero" if test["ci_low"] > 0 else "not above zero"
            words += f"; pooled over {test['seeds']} seeds: {where}"
        lines.append(words)
    if not lines:
        return []
    return ["Seeds where each run learned (its test-set interval above zero):", "", *lines, ""]


def _spread_sd(spread: SeedSpread, decimals: int) -> str:
    """A seed spread in words: its standard deviation and degrees of freedom (none below two seeds)."""
    if not spread.df:
        return "not estimable (no run measured on two seeds)"
    return f"sd {fmt_number(math.sqrt(spread.tau2), decimals, signed=False)} ({spread.df} degrees of freedom)"


def across_seeds(
    claims: Mapping[int, pd.DataFrame],
    differences: Mapping[int, pd.DataFrame],
    *,
    confidence: float,
    alpha: float,
    power: float,
    learning: Mapping[int, pd.DataFrame] | None = None,
    gated: Mapping[str, Sequence[str]] | None = None,
) -> pd.DataFrame:
    """One row per claim (in the first seed's order): the per-seed columns ``{effect, ci_low, ci_high,
    verdict}_{seed}``, then ``tested_in``, ``holds_in``, ``pooled_seeds``, ``pooled_on``, ``effect``,
    ``ci_low``, ``ci_high``, ``n_problems`` (the pooled seeds' problem counts), ``detectable_effect``,
    ``pvalue``, ``gate``, ``paper_effect``, ``pvalue_holm`` and ``verdict`` (pooled). ``claims[s]``: seed
    s's ``claims.csv``; ``differences[s]``: its ``differences.csv`` (``DIFFERENCE_COLUMNS``);
    ``learning[s]``: its ``learning.csv``, and ``gated``: ``{claim id: the runs it gates on}``: given
    both, the seeds pooled and the pooled learning gate of the module docstring (a claim ``gated`` does
    not name keeps the per-seed rule)."""
    seeds = list(claims)
    if not seeds:
        raise ValueError("across_seeds needs the claims of at least one seed")
    if set(differences) != set(seeds):
        raise ValueError(f"claims of seeds {sorted(seeds)} but differences of seeds {sorted(differences)}")
    if (learning is None) != (gated is None):
        raise ValueError("across_seeds: learning and gated go together")
    if learning is not None and set(learning) != set(seeds):
        raise ValueError(f"claims of seeds {sorted(seeds)} but learning of seeds {sorted(learning)}")
    ran = {s: learning[s].set_index("run") for s in seeds} if learning is not None else {}
    works = {s: seed_instrument_works(claims[s]) for s in seeds}
    spreads = learning_spreads(differences)
    instrument = pooled_instrument(differences, works, confidence=confidence, spreads=spreads, power=power)
    # the instrument gates pooled with the learning tables (the pooled learning gate), on two seeds or more
    # that each record its every part; else each seed's own check gates (one seed: the same data)
    recorded = [s for s in seeds if instrument and all(s in p["seeds"] for p in instrument)]
    pooled_rule = gated is not None and len(seeds) >= MIN_POOLED_SEEDS and len(recorded) == len(seeds)
    blocked = instrument_gate(instrument) if pooled_rule else None
    # the seeds a gated claim may pool: every seed under the pooled rule (where the instrument fails, the
    # pooled effect is still shown, with the reason for a verdict), each working seed without it
    usable = {s: pooled_rule or works[s] for s in seeds}
    first = claims[seeds[0]]
    by_id = {s: claims[s].set_index("id") for s in seeds}
    diffs = {s: {cid: g["difference"].to_numpy(dtype=float) for cid, g in differences[s].groupby("claim")}
             for s in seeds}  # fmt: skip
    rows, gate_of, pooled_values = [], {}, {}
    for _, ref in first.iterrows():
        cid = ref["id"]
        row: dict[str, object] = {"id": cid, "statement": ref["statement"], "metric": ref["metric"]}
        per_seed, counts, pooled_on, n_tested, n_holds, not_pooled = [], [], [], 0, 0, []
        for s in seeds:
            mine = by_id[s]
            if cid not in mine.index:
                raise ValueError(
                    f"seed {s}: claims.csv has no claim {cid!r} (seeds ran different claim sets)"
                )
            r = mine.loc[cid]
            for col in PER_SEED:
                row[f"{col}_{s}"] = r[col]
            read = pd.notna(r["effect"]) and r["verdict"] in READ
            n_tested += int(read)
            n_holds += int(read and r["verdict"] == "holds")
            gates = gated[cid] if gated is not None and cid in gated else None
            why = _not_pooled(s, r, gates, ran.get(s), usable[s])
            d = diffs[s].get(cid, np.empty(0))
            if why is None and d.size:
                per_seed.append(d)
                counts.append(d.size)
                pooled_on.append(s)
            else:
                not_pooled.append(why or f"seed {s}: no per-problem values")
        row.update(tested_in=n_tested, holds_in=n_holds, pooled_seeds=len(per_seed),
                   pooled_on=",".join(map(str, pooled_on)), not_pooled="; ".join(not_pooled),
                   n_problems=",".join(map(str, counts)))  # fmt: skip
        pooled_values[cid] = per_seed
        reasons = []
        if gated is not None and cid in gated and len(pooled_on) >= MIN_POOLED_SEEDS:
            for run in dict.fromkeys(g for g in gated[cid] if g in ran[pooled_on[0]].index):
                key = (run, tuple(pooled_on))
                if key not in gate_of:
                    gate_of[key] = pooled_gate(run, pooled_on, ran, differences, confidence=confidence,
                                               power=power, spread=spreads["test"])  # fmt: skip
                reasons += [gate_of[key]] if gate_of[key] else []
        row["gate"] = "; ".join(reasons)
        row["paper_effect"] = ref.get("paper_effect", math.nan)
        rows.append(row)
    # the claims share one seed spread, pooled over every claim read on two seeds or more
    spread = seed_spread(v for v in pooled_values.values() if len(v) >= MIN_POOLED_SEEDS)
    need: dict[str, int | None] = {}  # the seeds the paper's own effect needs, where the pool reads one
    m = max(len(_holm_family(rows, blocked, gated)), 1)  # the level of the test each claim is read by
    for row in rows:
        paper = float(row["paper_effect"])
        columns, need[row["id"]] = _claim_effect(
            pooled_values[row["id"]], spread, paper, confidence=confidence, alpha=alpha / m, power=power
        )
        row.update(columns)
    _pooled_verdicts(rows, alpha, blocked, gated, need)
    columns = [c for name in ACROSS_SEED_COLUMNS
               for c in ([name.format(seed=s) for s in seeds] if "{seed}" in name else [name])]  # fmt: skip
    if rows and set(rows[0]) != set(columns):  # a column added to one and not the other
        raise RuntimeError(f"across_seeds: rows {sorted(rows[0])} against ACROSS_SEED_COLUMNS {columns}")
    frame = pd.DataFrame(rows, columns=columns)
    frame.attrs.update(seeds=seeds, works=works, instrument=instrument, instrument_pooled=pooled_rule,
                       instrument_blocked=blocked, spread=spread)  # fmt: skip
    return frame


def _claim_effect(
    per_seed: Sequence[np.ndarray],
    spread: SeedSpread,
    paper: float,
    *,
    confidence: float,
    alpha: float,
    power: float,
) -> tuple[dict, int | None]:
    """A claim's pooled columns: ``effect``, ``ci_low``, ``ci_high``, ``detectable_effect`` (one-sided at
    ``alpha``, the claims' Holm worst case) and ``pvalue`` (NaN where no seed pools it); and, read on
    ``MIN_POOLED_SEEDS`` seeds or more with a positive ``paper`` effect (NaN: none), the seeds on which
    that effect would be found so (``Pooled.seeds_for``; None: none, or more than 100)."""
    if not per_seed:
        return dict.fromkeys(("effect", "ci_low", "ci_high", "detectable_effect", "pvalue"), math.nan), None
    pooled: Pooled = random_effects_interval(per_seed, confidence=confidence, spread=spread)
    columns = {"effect": pooled.effect, "ci_low": pooled.low, "ci_high": pooled.high,
               "detectable_effect": pooled.detectable(alpha=alpha, power=power),
               "pvalue": pooled.pvalue}  # fmt: skip
    if len(per_seed) < MIN_POOLED_SEEDS or not paper > 0:
        return columns, None
    return columns, pooled.seeds_for(paper, alpha=alpha, power=power, members=spread.members or 1)


def instrument_gate(instrument: Sequence[Mapping]) -> str | None:
    """Why no gated claim is read pooled over the seeds (None: they are): ``pooled_instrument``'s parts,
    each of which must be above zero. No part recorded (files older than the per-problem values): None,
    and each seed's own check gates (``across_seeds``)."""
    failed = [p for p in instrument if not p["ok"]]
    if not failed:
        return None
    where = ", ".join(map(str, sorted({s for p in failed for s in p["seeds"]})))
    parts = "; ".join(
        f"{p['what']} {fmt_interval(p['effect'], p['ci_low'], p['ci_high'], 3)}" for p in failed
    )
    return f"{NOT_WORKING} pooled over seeds {where} ({parts})"


def _truthy(v: object) -> bool:
    """A ``learning.csv`` flag read back by pandas: True, "True" or a numpy True (empty: False)."""
    return v is True or v == "True" or (isinstance(v, np.bool_) and bool(v))


def _gate_reason(runs: pd.DataFrame, run: str) -> str | None:
    """Why one seed's ``learning.csv`` (indexed by run) keeps a claim gating on ``run`` from pooling that
    seed; None where it lets it: the run's objective was measured on the test set and, for an off-policy
    run, its last PPO iteration stayed in the first-order regime (``maxk.analysis.learning``); whether
    it learned is read pooled. A model that is no trained run (the base, a re-tempered base) gates
    nothing."""
    if run not in runs.index:
        return None
    row = runs.loc[run]
    if pd.isna(row.get("learned")):
        return f"{run}'s objective not measured"
    if not _truthy(row.get("off_policy")) or _truthy(row.get("regime_ok")):
        return None
    clamped = row.get("clamped_frac")
    share = f" ({float(clamped):.0%} of its ratios clamped)" if pd.notna(clamped) else ""
    return f"{run} out of its off-policy regime{share}"


def _not_pooled(
    seed: int,
    row: pd.Series,
    gates: Sequence[str] | None,
    runs: pd.DataFrame | None,
    usable: bool,
) -> str | None:
    """Why claim ``row`` (one seed's ``claims.csv`` row) is not pooled on ``seed``; None: it is, when it
    has per-problem values (``across_seeds``'s rule, in words). ``gates``: the runs the claim gates on
    (None: an ungated claim, pooled where the seed read it); ``runs``: that seed's ``learning.csv`` by
    run (given wherever ``gates`` is); ``usable``: the seed may pool gated claims (the instrument's
    rule)."""
    if pd.isna(row["effect"]):
        return f"seed {seed}: no effect ({row['verdict']})"
    if gates is None:
        return None if row["verdict"] in READ else f"seed {seed}: {row['verdict']}"
    if not usable:
        return f"seed {seed}: {NOT_WORKING}"
    why = [w for w in (_gate_reason(runs, g) for g in gates) if w]
    return f"seed {seed}: {'; '.join(why)}" if why else None


def pooled_gate(
    run: str,
    seeds: Sequence[int],
    learning: Mapping[int, pd.DataFrame],
    differences: Mapping[int, pd.DataFrame],
    *,
    confidence: float,
    power: float | None = None,
    spread: SeedSpread | None = None,
) -> str | None:
    """Why a claim pooled over ``seeds`` cannot be read on ``run`` (None: it can): its test-set effect
    on its own objective (``learned:test:{run}`` in each seed's differences) pooled over those seeds
    with the random-effects interval (``learning_across_seeds``'s, with the runs' pooled ``spread``
    (``learning_spreads``), so the same seeds give the same interval and, with ``power``, the same
    smallest detectable effect, named in the reason: a run that gained less than it is "not testable"
    for want of power) is not above zero. ``learning[s]``: seed s's ``learning.csv`` indexed by run."""
    key, where = f"learned:test:{run}", ", ".join(map(str, seeds))
    values = [series_of(differences[s], key) for s in seeds]
    if any(v.size == 0 for v in values):
        return f"{run}'s per-problem test-set effect is missing on a seed of {where}"
    pooled = _pooled_part(values, confidence=confidence, power=power, spread=spread)
    if pooled["ci_low"] > 0:
        return None
    objective = learning[seeds[0]].loc[run, "objective"]
    interval = fmt_interval(pooled["effect"], pooled["ci_low"], pooled["ci_high"], 3)
    detectable = fmt_number(pooled["detectable"], 3, signed=False)
    return f"{run} did not raise {objective} pooled over seeds {where} ({interval}" + (
        f"; detectable {detectable})" if detectable else ")"
    )


def _underpowered(row: Mapping, seeds_needed: int | None = None) -> str | None:
    """``UNDECIDED`` with its reason where a claim not shown to hold could not have been: the paper
    reports a positive effect and the pool's smallest detectable effect (``detectable_effect``: with
    the claims' power at their Holm worst-case level) is above it, so the pool may miss the paper's own
    effect; None where the pool detects it, or the paper has none to compare with. ``seeds_needed``: the
    seeds on which the paper's effect would be found so (``Pooled.seeds_for``; None: more than 100)."""
    paper, detectable = row.get("paper_effect"), row.get("detectable_effect")
    if paper is None or detectable is None or not (math.isfinite(paper) and math.isfinite(detectable)):
        return None
    if paper <= 0 or detectable <= paper:
        return None
    need = (
        f"about {seeds_needed} seeds like these"
        if seeds_needed
        else "more than 100 seeds like these, or more problems"
    )
    return (
        f"{UNDECIDED}: not shown to hold, but the pool detects {detectable:.3f} with the claims' power and "
        f"the paper's effect is {paper:+.3f} (finding it needs {need})"
    )


def _pooled_verdicts(
    rows: list[dict],
    alpha: float,
    blocked: str | None = None,
    gated: Mapping[str, Sequence[str]] | None = None,
    need: Mapping[str, int | None] | None = None,
) -> None:
    """``pvalue_holm`` and ``verdict`` of each row (see the module docstring), in place. ``blocked``
    (``instrument_gate``): every claim ``gated`` names reads it instead of a verdict; ``need``: the seeds
    each claim's paper effect needs (``_underpowered``)."""
    if blocked:
        for r in rows:
            if r["id"] in (gated or {}):
                r["gate"] = "; ".join([blocked, *([r["gate"]] if r["gate"] else [])])
                r["pvalue_holm"], r["verdict"] = math.nan, blocked
        rows = [r for r in rows if r["id"] not in (gated or {})]
    pooled = _holm_family(rows, blocked, gated)
    for r, p in zip(pooled, holm([r["pvalue"] for r in pooled]), strict=True):
        r["pvalue_holm"] = p
        if r["effect"] > 0 and p < alpha:
            r["verdict"] = "holds"
        else:
            r["verdict"] = _underpowered(r, (need or {}).get(r["id"])) or "does not hold"
    for r in rows:
        if r["pooled_seeds"] < MIN_POOLED_SEEDS:
            r["pvalue_holm"] = math.nan
            kind = ONE_SEED if r["pooled_seeds"] else NOT_READ
            r["verdict"] = f"{kind}: {r['not_pooled']}" if r.get("not_pooled") else kind
        elif r["gate"]:
            r["pvalue_holm"] = math.nan
            r["verdict"] = f"{NOT_TESTABLE}: {r['gate']}"


def _holm_family(
    rows: Sequence[Mapping], blocked: str | None, gated: Mapping[str, Sequence[str]] | None
) -> list:
    """The claims whose pooled p-values are Holm-adjusted together: pooled on ``MIN_POOLED_SEEDS`` seeds
    or more, no run they gate on short of its pooled learning gate, not blocked by the pooled instrument
    (``blocked``: every claim ``gated`` names). Its size ``m`` sets each claim's ``detectable_effect``
    level, ``alpha / m``."""
    out = []
    for r in rows:
        if blocked and r["id"] in (gated or {}):
            continue
        if r["pooled_seeds"] >= MIN_POOLED_SEEDS and not r["gate"]:
            out.append(r)
    return out


def render_across_seeds(frame: pd.DataFrame, decimals: int, *, confidence: float, power: float) -> str:
    """``across_seeds.md``: which seeds' instruments work, then one line per claim."""
    seeds, works = frame.attrs["seeds"], frame.attrs["works"]
    ok = [s for s in seeds if works[s]]
    lines = [
        f"# The paper's claims across {len(seeds)} seeds ({', '.join(map(str, seeds))})",
        "",
        "Instrument (RL raises its own objective on unseen problems; each seed's claims.md): "
        + "; ".join(f"seed {s} {'works' if works[s] else 'NOT WORKING'}" for s in seeds)
        + f" ({len(ok)} of {len(seeds)}). "
        + _pooling_rule(frame),
        "",
    ]
    for p in frame.attrs.get("instrument", []):
        n = len(p["seeds"])
        lines.append(
            f"- instrument, {p['what']}, mean over all {n} seed(s) that record it (working or not): "
            f"{fmt_interval(p['effect'], p['ci_low'], p['ci_high'], decimals)} ({confidence:.0%} "
            f"random-effects t interval, the runs' spread between seeds): "
            f"{'above zero' if p['ok'] else 'NOT above zero'}; "
            f"the per-seed check passes on {p['works_in']} of {n} seed(s)" + _power_words(p, power, decimals)
        )
    if frame.attrs.get("instrument"):
        lines.append("")
    lines += render_learning_across_seeds(
        frame.attrs.get("learning") or [], seeds, decimals, frame.attrs.get("learning_spreads")
    )
    return "\n".join(lines + render_claim_rows(frame, decimals, confidence=confidence, power=power)) + "\n"


def _pooling_rule(frame: pd.DataFrame) -> str:
    """The across-seed report's sentence on which seeds a claim pools (``across_seeds``'s rule)."""
    rule = (
        "where every run it compares was measured (and, off-policy, stayed in its regime); it is read where "
        "each of those runs raised its own objective pooled over the same seeds (the learning gate, pooled: "
        "one seed's gate flips with the last bits of the weights)."
    )
    if not frame.attrs.get("instrument_pooled"):  # one seed, no learning tables, or older files
        return "Each claim is pooled over the seeds whose instrument works and " + rule
    if frame.attrs.get("instrument_blocked"):
        return (
            "Pooled over every seed (below), the instrument does not work: the claims it gates are not "
            "read, each pooled effect is shown beside the reason."
        )
    return (
        "Pooled over every seed (below), the instrument works, so each claim is pooled over every seed "
        + rule
        + " One seed's instrument, like its learning gate, sits at the edge of its power: pooling only the "
        "seeds where it passed would select the seeds where RL happened to gain more."
    )


def render_claim_rows(frame: pd.DataFrame, decimals: int, *, confidence: float, power: float) -> list[str]:
    """One family of claims across seeds (``across_seeds``'s frame): a line per claim, then the legend."""
    seeds = frame.attrs["seeds"]
    lines: list[str] = []
    head = [
        "claim",
        *(f"seed {s}" for s in seeds),
        "holds in",
        "pooled effect [CI]",
        "p (Holm), pooled",
        "pooled verdict",
        "detectable",
        "paper effect",
    ]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in frame.to_dict("records"):
        cells = [f"`{r['id']}`"]
        for s in seeds:
            e = r[f"effect_{s}"]
            if e is None or (isinstance(e, float) and math.isnan(e)):
                cells.append("not tested")
                continue
            cell = fmt_interval(e, r[f"ci_low_{s}"], r[f"ci_high_{s}"], decimals)
            verdict = r[f"verdict_{s}"]
            mark = (
                " (n/w)"
                if verdict == NOT_WORKING
                else " (n/t)"
                if str(verdict).startswith(NOT_TESTABLE)
                else ""
            )
            cells.append(f"**{cell}**" if verdict == "holds" else cell + mark)
        cells.append(f"{r['holds_in']} of {r['tested_in']}")
        pooled = fmt_interval(r["effect"], r["ci_low"], r["ci_high"], decimals) if r["pooled_seeds"] else ""
        verdict = r.get("verdict", "")
        cells += [
            pooled,
            fmt_number(r.get("pvalue_holm"), decimals, signed=False),
            f"**{verdict}**" if verdict == "holds" else str(verdict),
            fmt_number(r["detectable_effect"], decimals, signed=False),
            fmt_number(r["paper_effect"], decimals),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Per seed: the effect (mean over problems of a - b) with its bootstrap interval over problems, as "
        "that seed's claims.md has it; bold: the claim holds on that seed (Holm-adjusted Wilcoxon); (n/w): "
        "that seed's instrument is not working; (n/t): not testable there, a run it compares did not learn "
        "its own objective (the table above). holds in: seeds where it holds, of those where it was "
        f"read. pooled: the mean of the seeds' effects with a {confidence:.0%} random-effects t interval, "
        f"over the seeds it pools (every seed where the instrument works pooled, else each seed where it "
        f"works; every run it compares measured and in its regime): its variance is the spread between "
        f"seeds ({_spread_words(frame.attrs.get('spread'), decimals)}, or the claim's own where larger) "
        "plus each seed's problem noise, over the number of seeds (docs/design.md, 'Several seeds'). "
        f"pooled verdict (on {MIN_POOLED_SEEDS} or more seeds): 'not testable' "
        "where a run it compares did not raise its own objective pooled over the same seeds (the run "
        "and its pooled interval are named); else holds when the pooled effect is positive and its "
        "one-sided t-test p-value, Holm-adjusted across the claims read pooled, is below "
        f"the claims' alpha, '{UNDECIDED}' where it is not and the pool's detectable effect is above the "
        "paper's (the pool could have missed the paper's own effect), else does not hold; "
        f"'{NOT_WORKING} pooled ...': the instrument's pooled interval is not above "
        f"zero; '{ONE_SEED}': that seed's verdict stands alone; '{NOT_READ}': no seed "
        "could read it. "
        "detectable: the smallest true effect a "
        f"test at the claims' Holm level finds with {power:.0%} power at this number of seeds and problems. "
        "paper effect: the paper's a - b on the same metric (its tables).",
    ]
    return lines


def render_yardstick_across_seeds(
    frame: pd.DataFrame, decimals: int, *, confidence: float, power: float
) -> str:
    """``across_seeds.md``'s last section: the yardstick claims (``maxk.analysis.claims.yardstick_claims``)
    across seeds, their own Holm family."""
    lines = [
        "",
        "## Beyond the paper: each run against the base re-tempered, across seeds",
        "",
        "Each run against the base at its best temperature at the run's own objective (each seed's "
        "claims.md, last section; `claims/yardstick.csv`), pooled like the paper's claims; a Holm family "
        "of its own.",
        "",
    ]
    return "\n".join(lines + render_claim_rows(frame, decimals, confidence=confidence, power=power)) + "\n"


def _power_words(part: Mapping, power: float, decimals: int) -> str:
    """The instrument part's power in words: the smallest gain its pooled interval finds with ``power``
    on these seeds, and how many seeds the gain measured would need (nothing where neither is known)."""
    if pd.isna(part.get("detectable")) or len(part["seeds"]) < 2:
        return ""
    words = f"; detectable with {power:.0%} power: {fmt_number(part['detectable'], decimals, signed=False)}"
    need = part.get("seeds_for")
    if part["effect"] > 0:
        words += (
            f"; the gain measured needs {need} seeds"
            if need
            else "; the gain measured needs more than 100 seeds"
        )
    return words


def _spread_words(spread: SeedSpread | None, decimals: int) -> str:
    """The claims' pooled seed spread in words: its standard deviation and degrees of freedom."""
    if spread is None or not spread.df:
        return "no claim read on two seeds: each claim's own"
    sd = fmt_number(math.sqrt(spread.tau2), decimals, signed=False)
    return f"sd {sd} pooled over the claims, {spread.df} degrees of freedom"


def curve_bands(
    metrics: Mapping[int, Mapping[str, pd.DataFrame]],
    columns: Sequence[str],
    *,
    confidence: float,
) -> pd.DataFrame:
    """For each model and metric column (``pass@k``, ``max@k``): the mean over seeds of the mean over
    problems, with a random-effects band (``random_effects_interval``; the seed spread of a column
    pooled over the models). ``metrics[seed][model]``: that seed's per-problem metrics frame. One row
    per (model, column): ``model``, ``column``, ``mean``, ``low``, ``high``, ``seeds``."""
    seeds = list(metrics)
    models = list(dict.fromkeys(m for s in seeds for m in metrics[s]))
    values = {
        (model, col): [f[col].to_numpy(dtype=float) for s in seeds if model in metrics[s]
                       for f in [metrics[s][model]] if col in f.columns]
        for model in models for col in columns
    }  # fmt: skip
    spreads = {col: seed_spread(v for (_, c), v in values.items() if c == col and v) for col in columns}
    rows = []
    for (model, col), per_seed in values.items():
        if per_seed:
            band = random_effects_interval(per_seed, confidence=confidence, spread=spreads[col])
            rows.append({"model": model, "column": col, "mean": band.effect, "low": band.low,
                         "high": band.high, "seeds": band.seeds})  # fmt: skip
    return pd.DataFrame(rows, columns=["model", "column", "mean", "low", "high", "seeds"])


def curves_figure(
    bands: pd.DataFrame, labels: Mapping[str, str], paths: Sequence[str], *, dataset: str
) -> None:
    """pass@k (left) and max@k (right) against k for each model: the mean over seeds, with the
    random-effects band of ``curve_bands``; written to ``paths``."""
    from maxk.analysis.figures import METRIC_NAMES, save_figure, setup_matplotlib
    from maxk.analysis.per_problem import parse_metric_column

    plt = setup_matplotlib()
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.4), sharex=True)
    for ax, metric in zip(axes, ("pass", "max"), strict=True):
        for model in dict.fromkeys(bands["model"]):
            part = bands[bands["model"] == model].copy()
            part["k"] = [
                p[1] if (p := parse_metric_column(c)) and p[0] == metric else None for c in part["column"]
            ]
            part = part.dropna(subset=["k"]).sort_values("k")
            if part.empty:
                continue
            (line,) = ax.plot(
                part["k"], part["mean"], marker="o", markersize=3, label=labels.get(model, model)
            )
            ax.fill_between(
                part["k"], part["low"], part["high"], alpha=0.2, color=line.get_color(), linewidth=0
            )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("k")
        ax.set_ylabel(METRIC_NAMES[metric])
    seeds = int(bands["seeds"].max()) if len(bands) else 0
    axes[0].set_title(f"{dataset}: mean over {seeds} seeds", fontsize="small")
    axes[1].legend(frameon=False, fontsize="x-small", loc="lower right")
    save_figure(fig, paths)
    plt.close(fig)


def claims_figure(frame: pd.DataFrame, paths: Sequence[str]) -> None:
    """An interval plot of the claims (rliable's style): each claim's pooled effect with its random-effects
    interval, each seed's effect as a dot, the paper's effect as a cross, zero as a line."""
    from maxk.analysis.figures import save_figure, setup_matplotlib

    plt = setup_matplotlib()
    seeds = frame.attrs["seeds"]
    fig, ax = plt.subplots(figsize=(6.4, 0.45 * len(frame) + 1.2))
    y = np.arange(len(frame))[::-1]
    for yi, r in zip(y, frame.to_dict("records"), strict=True):
        if r["pooled_seeds"]:
            ax.plot(
                [r["ci_low"], r["ci_high"]],
                [yi, yi],
                color="C0",
                linewidth=4,
                alpha=0.5,
                solid_capstyle="butt",
            )
            ax.plot([r["effect"]], [yi], "o", color="C0", markersize=5)
        for j, s in enumerate(seeds):
            e = r[f"effect_{s}"]
            if e is not None and not (isinstance(e, float) and math.isnan(e)):
                ax.plot([e], [yi + 0.18 * (j - (len(seeds) - 1) / 2) / max(len(seeds), 1)], ".", color="0.35",
                        markersize=4, label="a seed" if yi == y[0] and j == 0 else None)  # fmt: skip
        p = r["paper_effect"]
        if p is not None and not (isinstance(p, float) and math.isnan(p)):
            ax.plot([p], [yi], "x", color="C3", markersize=6, label="paper" if yi == y[0] else None)
    ax.axvline(0.0, color="0.2", linewidth=0.8)
    ax.set_yticks(y, [str(i) for i in frame["id"]], fontsize="x-small")
    ax.set_xlabel("effect (a - b): pooled over seeds with a random-effects 95 % interval")
    ax.legend(frameon=False, fontsize="x-small", loc="lower right")
    save_figure(fig, paths)
    plt.close(fig)
