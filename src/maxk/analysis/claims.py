"""The paper's findings, each tested on one seed's run: one row per claim
(``results/seed{seed}/claims/claims.csv``; across the seeds: ``maxk.analysis.across_seeds``).

A claim says that side ``a`` beats side ``b`` on one dataset and one per-problem quantity:

- ``pass@k`` or ``max@k`` from the metrics files (``k`` an integer, or ``LARGE``: the largest k of
  the paper's tables that both sides' samples allow, ``analysis.claims.large_k`` = 128 at most);
- ``entropy``: the mean generation entropy of the problem's samples (as figure 2 computes it).

A side is a run, ``MeanOf(runs)`` (the per-problem mean of several runs: "the inference-aware
methods") or ``BestOf(runs)`` (the run with the highest mean: "the best other method").

For each claim, over the P problems both sides share (paired):

- ``effect`` = mean over problems of ``a - b`` (positive when the claim's direction holds), with a
  percentile bootstrap interval (problems resampled, seeded per claim);
- ``pvalue``: the one-sided Wilcoxon signed-rank test of ``a > b`` (scipy; zero differences handled
  by ``analysis.significance.zero_method``), ``pvalue_holm``: Holm-adjusted across the claims tested;
- ``holds``: ``effect > 0`` and ``pvalue_holm < alpha``; ``direction`` alone: ``effect > 0``;
- ``detectable_effect``: the smallest true mean difference the test detects with probability
  ``analysis.claims.power`` (0.8) at the Holm worst-case level ``alpha / m``, from the observed
  standard deviation of the differences (normal approximation):
  ``(z(1 - alpha/m) + z(power)) * sd(a - b) / sqrt(P)``. An effect smaller than this is not
  evidence against the claim: the run is too small to see it.

The claims name the paper's runs (``ROLES``: ``bon_loo1``, ``grpo_e4_ppo1``, ...). A config whose runs
play them under other names (a probe design: ``k2_bon_loo1_e4`` for ``bon_loo1``) says so in
``analysis.claims.roles`` (``paper_claims``, ``with_roles``): the claims then read those runs, the
paper's values are still looked up by role, and the ids stay, so seeds pool as before.

Where ``analysis.claims.paper_dataset`` names one of the paper's datasets (``CC``: CodeContests or
its stand-in), the paper's published values of both sides are printed beside ours
(``maxk.analysis.paper_results``), with the paper's effect ``paper_a - paper_b``.

**The instrument check comes first** (``instrument_check``; not one of the paper's claims): RL must
raise its own objective on problems it never saw, or no claim can fall either way. It holds when
the run ``analysis.claims.instrument_run`` names (default ``grpo_continuous``) beats the base model
on max@1 (the mean reward, the objective it trains) on the claims' dataset with a bootstrap interval
above zero, and its held-out learning curve (``train.heldout``) rises: the paired bootstrap interval of
each held-out problem's last minus first mean reward is above zero (a metrics CSV without per-problem
values: the curve ends above its start). Where it fails, every claim's ``verdict`` is
"instrument not working" instead of a finding. The base model's calibration block (its operating
point, ``maxk.train.base.calibration``) is printed beside it.

**The yardstick** (beyond the paper; ``analysis.claims.yardstick_temperatures``): does RL beat what
re-tempering the base buys at the same objective? Karan & Du ("Reasoning with Sampling", arXiv
2510.14901) find that sampling the base's power distribution matches GRPO at pass@1; lowering the
temperature is its cheapest form. ``yardstick_claims`` makes one claim per run of ``cfg["runs"]``: the
run beats ``BestOf`` the base and the base at each yardstick temperature (the models ``base_T{t}``,
``maxk.paths.tempered``) at the run's own objective (``maxk.analysis.learning.own_objective``). The
best temperature is chosen on the same problems the test reads, which favours the base (the claim is
conservative). They are their own Holm family (``claims/yardstick.csv``), so adding them does not
change the paper's claims' adjusted p-values. Like the paper's claims they are read only where the
instrument works; no learning gate: a run that did not raise its objective does not beat the base.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from maxk.analysis.config import BOOTSTRAP, DECIMALS, SIGNIFICANCE
from maxk.analysis.learning import best_by_mean, own_objective, yardstick_models
from maxk.analysis.per_problem import metric_column, parse_metric_column
from maxk.analysis.stats import detectable_effect, holm, paired_interval
from maxk.paths import BASE
from maxk.seeds import derive_seed

__all__ = [
    "CLAIMS",
    "COLUMNS",
    "INSTRUMENT_PARTS",
    "LARGE",
    "ROLES",
    "BestOf",
    "Claim",
    "MeanOf",
    "claim_inputs",
    "evaluate_claims",
    "heldout_curve",
    "heldout_endpoints",
    "instrument_check",
    "paper_claims",
    "render_claims_markdown",
    "render_instrument",
    "render_yardstick",
    "with_roles",
    "yardstick_claims",
    "yardstick_models",
]

#: ``Claim.k`` for "the largest k of the paper's tables that the samples allow".
LARGE = "large"
METRICS = ("pass", "max", "entropy")


@dataclass(frozen=True)
class MeanOf:
    """Per-problem mean of several runs."""

    runs: tuple[str, ...]


@dataclass(frozen=True)
class BestOf:
    """The run with the highest mean over problems (ties: the first listed)."""

    runs: tuple[str, ...]


Side = str | MeanOf | BestOf


@dataclass(frozen=True)
class Claim:
    """``a`` beats ``b`` on ``metric@k`` (``k`` unused for entropy), as the paper says in ``where``."""

    id: str
    statement: str
    where: str
    a: Side
    b: Side
    metric: str
    k: int | str | None = None
    #: the runs that must have learned for the claim to be read (``maxk.analysis.learning``); None:
    #: every run it compares. A claim ABOUT a run failing (the binary reward) cannot require it to learn.
    readable_if: tuple[str, ...] | None = None

    def runs(self) -> tuple[str, ...]:
        return _runs(self.a) + _runs(self.b)

    def gated_runs(self) -> tuple[str, ...]:
        return self.runs() if self.readable_if is None else self.readable_if


def _runs(side: Side) -> tuple[str, ...]:
    return (side,) if isinstance(side, str) else side.runs


def _side_name(side: Side) -> str:
    if isinstance(side, str):
        return side
    return f"{'mean' if isinstance(side, MeanOf) else 'best'} of {', '.join(side.runs)}"


_INFERENCE_AWARE = ("bon_max_second", "bon_max_mean", "bon_loo1", "bon_mean", "offpolicy_bon")
_RL = ("grpo_e1_ppo1", "grpo_e4_ppo1", "grpo_continuous", "grpo_e4_ppo3")

#: The paper's findings. Run names are the run matrix's (identical in every config).
CLAIMS: tuple[Claim, ...] = (
    Claim("grpo_raises_pass_at_1", "GRPO on the continuous reward raises pass@1 over the base model",
          "section 2.1, figure 1; table 1", "grpo_continuous", "base", "pass", 1),
    Claim("grpo_lowers_pass_at_large_k", "GRPO lowers pass@k at large k below the base model",
          "section 2.1, figure 1; table 1", "base", "grpo_continuous", "pass", LARGE),
    Claim("grpo_lowers_entropy", "GRPO skews the entropy of generations toward zero",
          "section 2.1, figure 2", "base", "grpo_continuous", "entropy"),
    Claim("binary_reward_below_base", "GRPO on the binary reward scores below the base model (pass@1)",
          "section 2.1, table 1", "base", "grpo_binary", "pass", 1, readable_if=()),
    Claim("continuous_beats_binary", "the continuous reward beats the binary reward (pass@1)",
          "section 2.1, table 1", "grpo_continuous", "grpo_binary", "pass", 1,
          readable_if=("grpo_continuous",)),
    Claim("offpolicy_bon_best_max_at_large_k",
          "off-policy BoN has the highest max@k at large k, above the best other method",
          "section 4.5, table 2", "offpolicy_bon", BestOf(("base", *_INFERENCE_AWARE[:-1])), "max", LARGE),
    Claim("bon_mean_beats_bon_loo1", "BoN mean beats BoN LOO-1 at large k (same objective, mean baseline)",
          "section 4.5, table 2", "bon_mean", "bon_loo1", "max", LARGE),
    Claim("inference_aware_raise_max_at_1", "the inference-aware methods raise max@1 over the base model",
          "section 4.5, table 3", MeanOf(_INFERENCE_AWARE), "base", "max", 1),
    Claim("more_epochs_raise_max_at_1", "four epochs of RL raise max@1 over one epoch",
          "appendix B, table 4", "grpo_e4_ppo1", "grpo_e1_ppo1", "max", 1),
    Claim("rl_lowers_max_at_large_k", "RL (one or four epochs, PPO 1 or 3) lowers max@k at large k",
          "appendix B, table 4", "base", MeanOf(_RL), "max", LARGE),
)  # fmt: skip

#: the runs the paper's claims name (its roles): ``analysis.claims.roles`` may give each another run
ROLES = tuple(sorted({r for c in CLAIMS for r in c.runs()} - {"base"}))


def with_roles(claims: Sequence[Claim], roles: Mapping[str, str] | None) -> tuple[Claim, ...]:
    """``claims`` with each run named in ``roles`` (``analysis.claims.roles``: paper run name -> the run
    of this config that plays it, e.g. ``bon_loo1: k2_bon_loo1_e4``) replaced, on both sides and in
    ``readable_if``; ids and statements unchanged, so the seeds' verdicts still pool by id. A role that
    no claim names is an error (a typo would otherwise leave the paper's run in place silently)."""
    roles = dict(roles or {})
    unknown = sorted(set(roles) - set(ROLES))
    if unknown:
        raise ValueError(
            f"analysis.claims.roles: {unknown} name no run of the paper's claims; roles: {list(ROLES)}"
        )

    def side(s: Side) -> Side:
        if isinstance(s, str):
            return roles.get(s, s)
        return type(s)(tuple(roles.get(r, r) for r in s.runs))

    return tuple(
        replace(c, a=side(c.a), b=side(c.b),
                readable_if=None if c.readable_if is None else tuple(roles.get(r, r) for r in c.readable_if))
        for c in claims
    )  # fmt: skip


def paper_claims(cfg: Mapping) -> tuple[Claim, ...]:
    """``CLAIMS`` read on this config's runs: ``with_roles(CLAIMS, analysis.claims.roles)``."""
    return with_roles(CLAIMS, (cfg.get("claims") or {}).get("roles"))


#: where the yardstick claims come from (not the paper)
YARDSTICK_WHERE = "beyond the paper: Karan & Du 2025, arXiv 2510.14901"


def yardstick_claims(cfg: Mapping) -> tuple[Claim, ...]:
    """One claim per run of ``cfg["runs"]`` that ``cfg["models"]`` lists (``runs``: each run's objective
    settings, ``maxk.analysis.learning.learning_settings``): the run beats the base at its best
    temperature (1 and each yardstick temperature) at the run's own objective. None without
    yardstick temperatures."""
    models = yardstick_models(cfg)
    if not models:
        return ()
    known = set(cfg.get("models") or {})
    out = []
    for run, settings in (cfg.get("runs") or {}).items():
        if run not in known:
            continue
        metric, k = own_objective(settings)
        out.append(Claim(
            f"{run}_beats_tempered_base",
            f"{run} beats the base at its best temperature at its own objective ({metric}@{k})",
            YARDSTICK_WHERE, run, BestOf((BASE, *models)), metric, k, readable_if=(),
        ))  # fmt: skip
    return tuple(out)


COLUMNS = (
    "id",
    "statement",
    "where",
    "dataset",
    "metric",
    "k",
    "k_requested",
    "a",
    "b",
    "a_value",
    "b_value",
    "effect",
    "ci_low",
    "ci_high",
    "n_problems",
    "statistic",
    "pvalue",
    "pvalue_holm",
    "direction",
    "holds",
    "detectable_effect",
    "paper_a",
    "paper_b",
    "paper_table",
    "paper_effect",
    "verdict",
    "note",
)

#: The instrument check's reference model and metric: the run's own objective, max@1 (= mean reward).
#: The run is ``analysis.claims.instrument_run`` (default: continuous GRPO, the paper's main run).
INSTRUMENT_BASE, INSTRUMENT_METRIC = "base", "max@1"
NOT_WORKING = "instrument not working"
#: the verdict's start where a run the claim compares did not learn (``maxk.analysis.learning.gates``)
NOT_TESTABLE = "not testable"
#: the verdicts of a claim that was read (the across-seed report pools these seeds only)
READ = ("holds", "does not hold")
#: the instrument check's two parts in a seed's ``differences.csv`` (``instrument_check``'s ``differences``):
#: the run's max@1 minus the base's per problem, and each held-out problem's last minus first mean reward
INSTRUMENT_PARTS = {"instrument": "max@1, run - base", "instrument_heldout": "held-out rise, last - first"}


def heldout_curve(train_metrics: pd.DataFrame) -> list[tuple[int, float]]:
    """``(step, held-out reward)`` points of a run's metrics CSV (``maxk.train.run``), in step order."""
    if "heldout/reward" not in train_metrics:
        return []
    rows = train_metrics.dropna(subset=["heldout/reward"]).sort_values("step")
    return [(int(s), float(v)) for s, v in zip(rows["step"], rows["heldout/reward"], strict=True)]


def heldout_endpoints(train_metrics: pd.DataFrame) -> tuple[np.ndarray, np.ndarray] | None:
    """Each held-out problem's mean reward at the curve's first and last point (the metrics CSV's
    ``heldout/problem_rewards``, ``maxk.train.heldout``), or None where the CSV has no such column."""
    from maxk.analysis.learning import measured_endpoints

    return measured_endpoints(train_metrics, "heldout", "rewards")


def instrument_check(
    cfg: Mapping,
    metrics: Mapping[tuple[str, str], pd.DataFrame],
    *,
    seed: int,
    curve: Sequence[tuple[int, float]] | None = None,
    endpoints: tuple[np.ndarray, np.ndarray] | None = None,
    calibration: Mapping | None = None,
    differences: dict[str, pd.Series] | None = None,
) -> dict:
    """Whether RL raises its own objective on unseen problems (see the module docstring).

    ``curve``: the held-out curve's ``(step, reward)`` points; ``endpoints``: each held-out problem's
    mean reward at its first and last point (``heldout_endpoints``). With endpoints, the curve rises
    when the paired bootstrap interval of last - first is above zero; without, when it ends above its
    start. Returns ``{"objective": {run, base, metric, dataset, a_value, b_value, effect, ci_low,
    ci_high, n_problems, ok}, "curve": {points, first, last, ok, and with endpoints effect, ci_low,
    ci_high, n_problems} or None, "calibration": the base's block or None, "works": bool, "reason":
    str}``. A missing run or metrics file makes ``works`` False with the reason. ``differences``, when
    given, is filled with the per-problem values of each part (``INSTRUMENT_PARTS``: the max@1
    differences indexed by problem id, the held-out rises by position), which the across-seed report
    pools (``maxk.analysis.across_seeds.pooled_instrument``).
    """
    dataset, run = cfg["claims"]["dataset"], cfg["claims"]["instrument_run"]
    out: dict = {"run": run, "objective": None, "curve": None, "calibration": calibration}
    out.update(works=False, reason="")
    pairs = [(run, dataset), (INSTRUMENT_BASE, dataset)]
    if any(p not in metrics for p in pairs):
        out["reason"] = f"no metrics of {run} and {INSTRUMENT_BASE} on {dataset}"
        return out
    series = {r: metrics[(r, d)].set_index("problem_id")[INSTRUMENT_METRIC].sort_index() for r, d in pairs}
    values = _aligned(series, "instrument")
    d = values[run] - values[INSTRUMENT_BASE]
    if differences is not None:
        differences["instrument"] = pd.Series(d, index=series[run].index, name="instrument")
    boot = cfg["bootstrap"]
    resamples, confidence = int(boot["resamples"]), float(boot["confidence"])
    effect, low, high = paired_interval(
        d, seed=derive_seed(seed, "claims", "instrument"), resamples=resamples, confidence=confidence
    )
    out["objective"] = {
        "run": run, "base": INSTRUMENT_BASE, "metric": INSTRUMENT_METRIC, "dataset": dataset,
        "a_value": float(values[run].mean()), "b_value": float(values[INSTRUMENT_BASE].mean()),
        "effect": effect, "ci_low": low, "ci_high": high, "n_problems": len(d), "ok": bool(low > 0),
    }  # fmt: skip
    reasons = [] if low > 0 else [f"{INSTRUMENT_METRIC} interval [{low:.3f}, {high:.3f}] is not above zero"]
    if curve:
        first, last = curve[0][1], curve[-1][1]
        out["curve"] = {"points": [list(p) for p in curve], "first": first, "last": last, "ok": last > first}
        if endpoints is not None:
            rise = endpoints[1] - endpoints[0]
            if differences is not None:
                index = pd.Index([str(i) for i in range(len(rise))], name="problem_id")
                differences["instrument_heldout"] = pd.Series(rise, index=index, name="instrument_heldout")
            mean, c_low, c_high = paired_interval(
                rise, seed=derive_seed(seed, "claims", "heldout"), resamples=resamples, confidence=confidence
            )
            out["curve"].update(
                effect=mean, ci_low=c_low, ci_high=c_high, n_problems=len(rise), ok=bool(c_low > 0)
            )
            if c_low <= 0:
                reasons.append(
                    f"held-out reward {first:.3f} -> {last:.3f}: interval of the rise "
                    f"[{c_low:.3f}, {c_high:.3f}] is not above zero (does not rise)"
                )
        elif last <= first:
            reasons.append(f"held-out reward {first:.3f} -> {last:.3f} does not rise")
    out["works"] = not reasons
    out["reason"] = "; ".join(reasons)
    return out


def claim_inputs(cfg: Mapping, claims: Sequence[Claim] | None = None) -> tuple[list[tuple[str, str]], list]:
    """``(metrics pairs, samples pairs)`` the claims, the instrument check, the per-run learning
    table (every run of ``cfg["runs"]`` against the base) and the yardstick (every run against the
    base at each ``yardstick_temperatures``: ``yardstick_models``) read: (run, dataset), runs of
    ``analysis.models``."""
    claims = paper_claims(cfg) if claims is None else claims
    dataset = cfg["claims"]["dataset"]
    known = set(cfg.get("models") or {})
    metrics, samples = set(), set()
    instrument = (cfg["claims"]["instrument_run"], INSTRUMENT_BASE)
    if set(instrument) <= known:
        metrics.update((run, dataset) for run in instrument)
    learned = [run for run in cfg.get("runs") or {} if run in known]
    if learned and INSTRUMENT_BASE in known:
        metrics.update((run, dataset) for run in (*learned, INSTRUMENT_BASE))
    for claim in claims:
        if not set(claim.runs()) <= known:
            continue
        target = samples if claim.metric == "entropy" else metrics
        target.update((run, dataset) for run in claim.runs())
    if learned and INSTRUMENT_BASE in known:  # the yardstick: every run against the tempered base
        metrics.update((model, dataset) for model in yardstick_models(cfg))
    return sorted(metrics), sorted(samples)


def _largest_k(frames: Sequence[pd.DataFrame], metric: str, cap: int) -> int | None:
    """The largest k <= cap that every frame has a ``metric@k`` column for."""
    common = None
    for frame in frames:
        ks = {p[1] for c in frame.columns if (p := parse_metric_column(c)) and p[0] == metric}
        common = ks if common is None else common & ks
    ok = [k for k in (common or ()) if k <= cap]
    return max(ok) if ok else None


def _aligned(series: Mapping[str, pd.Series], claim_id: str) -> dict[str, np.ndarray]:
    """Every run's per-problem values, checked to cover the same problems in the same order."""
    ids = None
    for run, s in series.items():
        if ids is None:
            ids = s.index
        elif not s.index.equals(ids):
            diff = sorted(set(ids).symmetric_difference(s.index))[:5]
            raise ValueError(f"claim {claim_id}: run {run!r} covers other problems than the rest: {diff}")
    return {run: s.to_numpy(dtype=np.float64) for run, s in series.items()}


def _combine(side: Side, values: Mapping[str, np.ndarray]) -> tuple[np.ndarray, str]:
    if isinstance(side, str):
        return values[side], side
    if isinstance(side, MeanOf):
        return np.mean([values[r] for r in side.runs], axis=0), _side_name(side)
    best = best_by_mean({r: float(values[r].mean()) for r in side.runs})
    return values[best], f"{best} (best of {', '.join(side.runs)})"


def _paper_values(
    claim: Claim, lookup: Callable[[str], tuple[str, float] | None]
) -> tuple[float | None, float | None, str | None]:
    """The paper's published value of each side (None where it has none) and the tables quoted."""
    hits = {run: lookup(run) for run in claim.runs()}
    tables = ", ".join(dict.fromkeys(h[0] for h in hits.values() if h is not None)) or None

    def side(s: Side) -> float | None:
        vals = [hits[r][1] if hits[r] is not None else None for r in _runs(s)]
        if any(v is None for v in vals):
            return None
        if isinstance(s, str):
            return vals[0]
        return float(np.mean(vals)) if isinstance(s, MeanOf) else float(max(vals))

    return side(claim.a), side(claim.b), tables


def evaluate_claims(
    cfg: Mapping,
    metrics: Mapping[tuple[str, str], pd.DataFrame],
    entropy: Mapping[tuple[str, str], pd.Series] | None = None,
    *,
    seed: int,
    claims: Sequence[Claim] | None = None,
    paper_lookup: Callable[[str, str, str, int], tuple[str, float] | None] | None = None,
    instrument_works: bool | None = None,
    differences: dict[str, pd.Series] | None = None,
    gates: Mapping[str, str | None] | None = None,
) -> pd.DataFrame:
    """One row per claim (``COLUMNS``). See the module docstring for every column.

    ``metrics[(run, dataset)]``: a per-problem metrics frame; ``entropy[(run, dataset)]``: per-problem
    entropy indexed by problem id. ``cfg``: the ``analysis`` config section. A claim whose runs are
    not all configured is reported with a note and no test. ``instrument_works`` (``instrument_check``):
    False makes every tested claim's ``verdict`` "instrument not working"; otherwise the verdict is
    "holds" or "does not hold" (None: no instrument check was made). ``differences``, when given, is
    filled with each tested claim's per-problem ``a - b`` (indexed by problem id): what the across-seed
    table resamples (``maxk.analysis.across_seeds``). ``gates`` (``maxk.analysis.learning.gates``):
    ``{run: why a claim on it cannot be read, or None}``; a claim with a reason for one of its
    ``gated_runs`` is computed but not read: its verdict is "not testable: <reasons>" and it is left out
    of the Holm family (``pvalue_holm`` empty), which holds the claims that are read.
    """
    from scipy.stats import wilcoxon

    claims = paper_claims(cfg) if claims is None else claims
    ccfg = cfg["claims"]
    role_of = {run: role for role, run in (ccfg.get("roles") or {}).items()}  # the paper knows the role
    dataset = ccfg["dataset"]
    cap, power = int(ccfg["large_k"]), float(ccfg["power"])
    sig, boot = cfg["significance"], cfg["bootstrap"]
    alpha, zero_method = float(sig["alpha"]), sig["zero_method"]
    resamples, confidence = int(boot["resamples"]), float(boot["confidence"])
    known = set(cfg.get("models") or {}) | set(yardstick_models(cfg))
    paper_dataset = ccfg.get("paper_dataset")

    rows, diffs = [], {}
    for claim in claims:
        if claim.metric not in METRICS:
            raise ValueError(f"claim {claim.id}: metric must be one of {METRICS}, got {claim.metric!r}")
        row = dict.fromkeys(COLUMNS)
        row.update(id=claim.id, statement=claim.statement, where=claim.where, dataset=dataset,
                   metric=claim.metric, a=_side_name(claim.a), b=_side_name(claim.b), note="")  # fmt: skip
        rows.append(row)
        missing = [r for r in claim.runs() if r not in known]
        if missing:
            row["note"] = f"not tested: run(s) {missing} not in analysis.models"
            continue
        runs = list(dict.fromkeys(claim.runs()))
        if claim.metric == "entropy":
            if not entropy or any((r, dataset) not in entropy for r in runs):
                row["note"] = "not tested: no per-problem entropy given"
                continue
            series = {r: entropy[(r, dataset)] for r in runs}
            k = None
        else:
            frames = {r: metrics[(r, dataset)] for r in runs}
            requested = cap if claim.k == LARGE else int(claim.k)
            k = _largest_k(list(frames.values()), claim.metric, requested)
            if k is None:
                row["note"] = f"not tested: no {claim.metric}@k with k <= {requested} in every run"
                continue
            row["k_requested"] = requested
            col = metric_column(claim.metric, k)
            series = {r: f.set_index("problem_id")[col].sort_index() for r, f in frames.items()}
        row["k"] = k
        values = _aligned(series, claim.id)
        a, row["a"] = _combine(claim.a, values)
        b, row["b"] = _combine(claim.b, values)
        d = a - b
        if differences is not None:
            differences[claim.id] = pd.Series(d, index=next(iter(series.values())).index, name=claim.id)
        effect, low, high = paired_interval(
            d, seed=derive_seed(seed, "claims", claim.id), resamples=resamples, confidence=confidence
        )
        row.update(a_value=float(a.mean()), b_value=float(b.mean()), effect=effect, ci_low=low, ci_high=high,
                   n_problems=len(d), direction=bool(effect > 0))  # fmt: skip
        if np.all(d == 0):
            row["note"] = "all differences are zero: the test is undefined"
        else:
            res = wilcoxon(a, b, alternative="greater", zero_method=zero_method)
            row.update(statistic=float(res.statistic), pvalue=float(res.pvalue))
            diffs[claim.id] = d
        if paper_dataset and paper_lookup and claim.metric != "entropy":
            paper_k = cap if claim.k == LARGE else int(claim.k)
            row["paper_a"], row["paper_b"], row["paper_table"] = _paper_values(
                claim,
                lambda run, _k=paper_k, _m=claim.metric: paper_lookup(
                    role_of.get(run, run), paper_dataset, _m, _k
                ),
            )
            if row["paper_a"] is not None and row["paper_b"] is not None:
                row["paper_effect"] = row["paper_a"] - row["paper_b"]

    blocked = {}
    for claim, r in zip(claims, rows, strict=True):
        reasons = [gates[run] for run in dict.fromkeys(claim.gated_runs()) if (gates or {}).get(run)]
        if reasons and r["effect"] is not None:
            blocked[claim.id] = f"{NOT_TESTABLE}: " + "; ".join(reasons)
    tested = [r for r in rows if r["pvalue"] is not None and r["id"] not in blocked]
    for r, p in zip(tested, holm([r["pvalue"] for r in tested]), strict=True):
        r["pvalue_holm"] = p
    m = max(len(tested), 1)
    for r in rows:
        r["holds"] = bool(r["pvalue_holm"] is not None and r["direction"] and r["pvalue_holm"] < alpha)
        if r["id"] in diffs:
            r["detectable_effect"] = detectable_effect(diffs[r["id"]], alpha=alpha / m, power=power)
        if r["effect"] is None:
            r["verdict"] = "not tested"
        elif instrument_works is False:
            r["verdict"] = NOT_WORKING
        elif r["id"] in blocked:
            r["verdict"] = blocked[r["id"]]
        else:
            r["verdict"] = "holds" if r["holds"] else "does not hold"
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _fmt(v: object, decimals: int) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.{decimals}f}" if abs(v) >= 10**-decimals or v == 0 else f"{v:.1e}"
    return str(v)


def render_claims_markdown(
    frame: pd.DataFrame,
    decimals: int = DECIMALS,
    *,
    alpha: float = SIGNIFICANCE.alpha,
    confidence: float = BOOTSTRAP.confidence,
    power: float = 0.8,
    instrument: Mapping | None = None,
    learning: Sequence[str] = (),
) -> str:
    """``claims.md``: the instrument check (``instrument_check``) when given, then ``learning`` (the
    lines of ``maxk.analysis.learning.render_learning``: what each run learned), then one line per
    claim, then the columns' meaning."""
    paper = frame["paper_a"].notna().any()
    head = ["claim", "comparison (a > b)", "metric", "a", "b", "effect [95% CI]", "p (Holm)",
            "detectable", "verdict"] + (["paper a", "paper b", "paper effect"] if paper else [])  # fmt: skip
    lines = render_instrument(instrument, decimals, confidence) if instrument is not None else []
    lines += [*learning, "## The paper's claims", ""] if instrument is not None or learning else []
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in frame.to_dict("records"):
        metric = "entropy" if r["metric"] == "entropy" else f"{r['metric']}@{_fmt(r['k'], 0)}"
        if r["effect"] is None or (isinstance(r["effect"], float) and math.isnan(r["effect"])):
            effect = r["note"]
        else:
            ci = f"[{_fmt(r['ci_low'], decimals)}, {_fmt(r['ci_high'], decimals)}]"
            effect = f"{_fmt(r['effect'], decimals)} {ci}"
        cells = [f"`{r['id']}`", f"{r['a']} > {r['b']}", metric, _fmt(r["a_value"], decimals),
                 _fmt(r["b_value"], decimals), effect, _fmt(r["pvalue_holm"], decimals),
                 _fmt(r["detectable_effect"], decimals), r["verdict"] or _fmt(r["holds"], 0)]  # fmt: skip
        if paper:
            cells += [_fmt(r[c], decimals) for c in ("paper_a", "paper_b", "paper_effect")]
        lines.append("| " + " | ".join(cells) + " |")
    datasets = ", ".join(sorted(set(frame["dataset"])))
    n = ", ".join(str(int(v)) for v in sorted(set(frame["n_problems"].dropna())))
    lines += [
        "",
        f"Dataset: {datasets}; {n or 'no'} paired problems. effect = mean over problems of a - b, with a "
        f"{confidence:.0%} bootstrap interval; p = one-sided Wilcoxon signed-rank test of a > b, "
        f"Holm-adjusted across the claims; holds = effect > 0 and adjusted p < {alpha}. detectable = the "
        f"smallest true effect this test finds with {power:.0%} power at this size (normal "
        "approximation): a claim whose effect is below it is untested rather than refuted."
        + (" paper effect = the paper's a - b on the same metric (its tables), to set beside ours and "
           "beside what this run can detect." if paper else ""),
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


def render_yardstick(
    frame: pd.DataFrame,
    decimals: int = DECIMALS,
    *,
    alpha: float = SIGNIFICANCE.alpha,
    confidence: float = BOOTSTRAP.confidence,
    power: float = 0.8,
) -> str:
    """``claims.md``'s last section: the yardstick claims (``yardstick_claims``), their own Holm family."""
    head = [
        "## Beyond the paper: each run against the base re-tempered",
        "",
        "Does RL beat lowering the base's temperature at the run's own objective? Each run against the "
        "base at its best temperature (the base, or the base sampled at another temperature, `base_T{t}`: "
        "the one with the highest mean at that objective on these problems, a choice that favours the "
        "base). These claims are a Holm family of their own; the paper's claims above are adjusted "
        "without them. After Karan & Du 2025 (arXiv 2510.14901).",
        "",
    ]
    table = render_claims_markdown(frame, decimals, alpha=alpha, confidence=confidence, power=power)
    return "\n".join(head) + table


def render_instrument(
    instrument: Mapping, decimals: int = DECIMALS, confidence: float = BOOTSTRAP.confidence
) -> list[str]:
    """The instrument check's section of ``claims.md`` (lines), with the base's calibration block."""
    works = instrument["works"]
    lines = [
        "## Instrument check (not a claim of the paper)",
        "",
        f"**{'The instrument works' if works else 'INSTRUMENT NOT WORKING'}**: RL "
        + ("raises its own objective on problems it never saw." if works
           else f"does not raise its own objective on unseen problems ({instrument['reason']}); every "
                "claim below reads \"instrument not working\" instead of a finding."),
        "",
    ]  # fmt: skip
    obj = instrument.get("objective")
    if obj:
        ci = f"[{_fmt(obj['ci_low'], decimals)}, {_fmt(obj['ci_high'], decimals)}]"
        lines.append(
            f"- {obj['metric']} (the mean reward: the objective GRPO trains) on {obj['dataset']}: "
            f"{obj['run']} {_fmt(obj['a_value'], decimals)} vs "
            f"{obj['base']} {_fmt(obj['b_value'], decimals)}, "
            f"effect {_fmt(obj['effect'], decimals)} {ci} ({confidence:.0%} paired bootstrap over "
            f"{obj['n_problems']} problems): {'above zero' if obj['ok'] else 'NOT above zero'}"
        )
    curve = instrument.get("curve")
    if curve:
        pts = ", ".join(f"{int(s)}: {_fmt(v, decimals)}" for s, v in curve["points"])
        rise = ""
        if "ci_low" in curve:
            rise = (f"; last - first {_fmt(curve['effect'], decimals)} [{_fmt(curve['ci_low'], decimals)}, "
                    f"{_fmt(curve['ci_high'], decimals)}] ({confidence:.0%} paired bootstrap over "
                    f"{curve['n_problems']} problems)")  # fmt: skip
        lines.append(f"- held-out reward of {instrument['run']} by step ({pts}){rise}: "
                     f"{'rises' if curve['ok'] else 'DOES NOT RISE'}")  # fmt: skip
    cal = instrument.get("calibration")
    if cal:
        items = "; ".join(
            f"{i['name']} {_fmt(i['value'], decimals)} (band {i['band']}) {'ok' if i['pass'] else 'MISSED'}"
            for i in cal["items"]
        )
        state = "every item in its band" if cal["passes"] else "MISSES ITS OPERATING POINT"
        lines.append(f"- base model calibration: {state}: {items}")
    return [*lines, ""]
