"""What each run learned: its own objective, before and after, where it never trained and where it did.

A claim that compares two methods can only be read where each of them learned what it was trained
for. For every run (``results/seed{seed}/claims/learning.csv``, and first in ``claims.md`` after the
instrument check):

- **its own objective** (``own_objective``): the quantity its estimator optimises: max@1 (the mean
  reward) for GRPO, max@k at its ``bon_k`` for the BoN-k methods, max@n (n = ``num_generations``) for
  BoN-max, which rewards the best of the n it samples; a binary-reward run: pass@1;
- **on the unseen test set** (the claims' dataset): run minus base per problem, with a paired
  bootstrap interval; the run **learned** when that interval is above zero. Beside each part's effect,
  the smallest true effect whose interval excludes zero with probability ``analysis.claims.power``
  (``maxk.analysis.stats.detectable_effect`` at ``alpha = (1 - confidence) / 2``): a run that "did not
  raise" its objective may have raised it by less than this;
- **on the held-out pool** (``train.heldout``): each held-out problem's value at the curve's last point
  minus its first (the start is the base model), paired interval;
- **on its own training prompts** (``train.heldout.own_prompts``): the same, last minus first, on a
  seeded sample of the prompts it trained on. A rise here with none on the test set is a
  generalisation failure; no rise here either, an optimisation failure;
- **the paper's own effect** at the same objective, where ``analysis.claims.paper_dataset`` names one
  of the paper's datasets and its tables report the run (by run name, else by estimator): the paper's
  run minus its base model (its full max@k tables 6-14, e.g. BoN mean's max@4 on CodeContests +0.037),
  to set beside ours and beside what this run can detect;
- **for an off-policy run** (an estimator that uses the ratio deltas): the first-order regime its
  derivation assumes (the paper's section 3.3: "probability ratios are usually close to 1"), read
  at its last PPO iteration from the training metrics: the share of deltas clamped at ``delta_clamp``
  and the median |delta|, each averaged over that iteration's optimizer steps, against
  ``analysis.claims.offpolicy_regime``;
- **against the base re-tempered** (beyond the paper; ``analysis.claims.yardstick_temperatures``): the
  base at its best temperature at the run's objective (``tempered_model``, of the base and each
  ``base_T{t}``; ``tempered_value``) and the run minus it (``tempered_effect``), point values: the
  test with its interval is the run's yardstick claim (``maxk.analysis.claims.yardstick_claims``);
- **why a claim on it cannot be read** (``gate``): the run did not raise its objective (and, where
  the paper reports the run, whether the paper's own effect is below or above what this test set
  detects: below it, a run that reproduced the paper's effect exactly would still miss it more often
  than ``1 - power``), or an off-policy run left its regime.

``gates`` turns the table into one reason per run why a claim on it cannot be read (None: it can).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from maxk.analysis.per_problem import metric_column
from maxk.analysis.stats import detectable_effect, paired_interval
from maxk.estimators import needs
from maxk.paths import BASE, tempered
from maxk.seeds import derive_seed

__all__ = [
    "LEARNING_COLUMNS",
    "PARTS",
    "best_by_mean",
    "best_tempered",
    "claims_config",
    "fmt_interval",
    "fmt_number",
    "gates",
    "learning_settings",
    "learning_table",
    "measured_endpoints",
    "own_objective",
    "regime",
    "render_learning",
    "yardstick_models",
]

#: where a run's own objective is read: test set (run - base), held-out pool and own prompts (last - first)
PARTS = {"test": "unseen test set, run - base", "heldout": "held-out pool, last - first",
         "own": "own training prompts, last - first"}  # fmt: skip

LEARNING_COLUMNS = (
    "run", "method", "objective", "dataset",
    *(f"{part}_{c}" for part in PARTS
      for c in ("before", "after", "effect", "ci_low", "ci_high", "n", "detectable")),
    "paper_before", "paper_after", "paper_effect", "paper_table",
    "tempered_model", "tempered_value", "tempered_effect",
    "learned", "off_policy", "regime_iteration", "clamped_frac", "median_abs_delta", "regime_ok", "gate",
)  # fmt: skip


#: a run's settings that say which objective it trains and how off-policy it is
LEARNING_KEYS = ("reward_kind", "bon_k", "num_generations", "num_iterations", "delta_clamp")
#: the ``analysis`` keys the claims read (with ``runs``: ``learning_settings``)
CLAIMS_KEYS = ("claims", "models", "significance", "bootstrap", "decimals")


def learning_settings(config: Mapping) -> dict[str, dict]:
    """Each run's method and ``LEARNING_KEYS`` as its job trains it (``maxk.train.launch.run_config``:
    ``train`` merged with the run's overrides) from the whole config."""
    from maxk.train.launch import run_config

    out = {}
    for run, entry in config["runs"].items():
        effective = run_config(config["train"], entry)
        out[run] = {"method": effective["advantage_method"], **{k: effective[k] for k in LEARNING_KEYS}}
    return out


def claims_config(config: Mapping) -> dict:
    """The claims' analysis config from the whole config: ``analysis``'s ``CLAIMS_KEYS`` and ``runs``
    (``learning_settings``): what the claims job (rule analysis_claims) and ``maxk analyze learning``
    read."""
    section = config["analysis"]
    return {**{k: section[k] for k in CLAIMS_KEYS if k in section}, "runs": learning_settings(config)}


def yardstick_models(cfg: Mapping) -> tuple[str, ...]:
    """The base sampled at each of ``analysis.claims.yardstick_temperatures`` (``base_T{t}``), in order."""
    return tuple(tempered(t) for t in (cfg.get("claims") or {}).get("yardstick_temperatures") or ())


def best_by_mean(means: Mapping[str, float]) -> str:
    """The name with the highest mean; ties: the first listed (``claims.BestOf`` and the yardstick)."""
    order = list(means)
    return max(order, key=lambda name: (means[name], -order.index(name)))


def best_tempered(
    metrics: Mapping[tuple[str, str], pd.DataFrame], models: tuple[str, ...], dataset: str, objective: str
) -> tuple[str, float] | None:
    """``(model, mean)`` of the base or tempered base (``models``, the base first) with the highest mean
    ``objective`` on ``dataset`` (``best_by_mean``); None where one is missing."""
    means = {}
    for model in (BASE, *models):
        frame = metrics.get((model, dataset))
        if frame is None or objective not in frame:
            return None
        means[model] = float(frame[objective].mean())
    best = best_by_mean(means)
    return best, means[best]


def own_objective(settings: Mapping) -> tuple[str, int]:
    """``(metric, k)`` of the objective a run trains, from its settings (``method``, ``reward_kind``,
    ``bon_k``, ``num_generations``): the registry's ``objective`` of its estimator (``max@1``,
    ``max@k`` at ``bon_k``, ``max@n`` at ``num_generations``); ``pass`` instead of ``max`` for a
    binary reward (pass@k is max@k of 0/1 rewards)."""
    size = needs(settings["method"]).objective
    k = {"max@1": 1, "max@k": int(settings["bon_k"]), "max@n": int(settings["num_generations"])}[size]
    return ("pass" if settings["reward_kind"] == "binary" else "max"), k


def measured_endpoints(
    train_metrics: pd.DataFrame, prefix: str, metric: str
) -> tuple[np.ndarray, np.ndarray] | None:
    """Each measured problem's ``metric`` (``rewards``, ``max@k``, ``pass@1``) at the first and last
    point of the run's ``prefix`` measurement (``heldout`` or ``own``; ``maxk.train.heldout``), or None
    where the metrics CSV has no such column or fewer than two points."""
    from maxk.train.heldout import problem_column

    col, anchor = problem_column(prefix, metric), f"{prefix}/reward"
    if col not in train_metrics or anchor not in train_metrics:
        return None
    rows = train_metrics.dropna(subset=[anchor, col]).sort_values("step")
    if len(rows) < 2:
        return None
    first, last = (
        np.array(str(v).split(), dtype=np.float64) for v in (rows[col].iloc[0], rows[col].iloc[-1])
    )
    if len(first) != len(last):
        raise ValueError(f"{col}: {len(first)} problems at the first point but {len(last)} at the last")
    return first, last


def regime(train_metrics: pd.DataFrame | None, limits: Mapping) -> dict:
    """The off-policy regime at the run's last PPO iteration: ``{"iteration", "clamped_frac",
    "median_abs_delta", "ok"}`` (``ok`` None where the metrics do not record it)."""
    out = {"iteration": None, "clamped_frac": None, "median_abs_delta": None, "ok": None}
    if train_metrics is None:
        return out
    iterations = sorted(
        int(c.rsplit("_iter", 1)[1]) for c in train_metrics.columns
        if c.startswith("delta/clamped_frac_iter") and train_metrics[c].notna().any()
    )  # fmt: skip
    if not iterations:
        return out
    last = iterations[-1]
    clamped = train_metrics[f"delta/clamped_frac_iter{last}"].dropna()
    median = train_metrics.get(f"delta/abs_q50_iter{last}", pd.Series(dtype=float)).dropna()
    out.update(iteration=last, clamped_frac=float(clamped.mean()))
    if median.size:
        out["median_abs_delta"] = float(median.mean())
        out["ok"] = bool(
            out["clamped_frac"] <= float(limits["max_clamped_frac"])
            and out["median_abs_delta"] <= float(limits["max_median_abs_delta"])
        )
    return out


def _interval(d: np.ndarray, seed: int, what: str, boot: Mapping) -> tuple[float, float, float]:
    return paired_interval(d, seed=derive_seed(seed, "learning", what), resamples=int(boot["resamples"]),
                           confidence=float(boot["confidence"]))  # fmt: skip


def learning_table(
    cfg: Mapping,
    metrics: Mapping[tuple[str, str], pd.DataFrame],
    train_metrics: Mapping[str, pd.DataFrame],
    *,
    seed: int,
    differences: dict[str, pd.Series] | None = None,
    paper_lookup: Callable[[str, str, str, int], tuple[str, float] | None] | None = None,
) -> pd.DataFrame:
    """One row per run of ``cfg["runs"]`` that ``cfg["models"]`` lists (``LEARNING_COLUMNS``).

    ``cfg``: the claims' analysis slice (``claims``, ``models``, ``bootstrap``, ``runs``: each run's
    settings, ``learning_settings``). ``metrics[(run, dataset)]``: per-problem
    metrics on the claims' dataset (the base's too); ``train_metrics[run]``: the run's metrics CSV.
    A part with nothing to read is left empty. ``differences``, when given, is filled with each part's
    per-problem values under ``learned:{part}:{run}`` (what the across-seed report pools).
    ``paper_lookup`` (``maxk.analysis.paper_results.paper_lookup``), when given, fills the paper's effect.
    """
    dataset, boot = cfg["claims"]["dataset"], cfg["bootstrap"]
    limits = cfg["claims"]["offpolicy_regime"]
    alpha, power = (1 - float(boot["confidence"])) / 2, float(cfg["claims"]["power"])
    known = set(cfg.get("models") or {})
    yardstick = yardstick_models(cfg)
    rows = []
    for run, settings in (cfg.get("runs") or {}).items():
        if run not in known:
            continue
        metric, k = own_objective(settings)
        objective = metric_column(metric, k)
        row = dict.fromkeys(LEARNING_COLUMNS)
        row.update(run=run, method=settings["method"], objective=objective, dataset=dataset)
        per_part: dict[str, tuple[np.ndarray, np.ndarray, pd.Index]] = {}
        pair = [(run, dataset), ("base", dataset)]
        if all(p in metrics and objective in metrics[p] for p in pair):
            after, before = (metrics[p].set_index("problem_id")[objective].sort_index() for p in pair)
            if not after.index.equals(before.index):
                raise ValueError(f"learning: {run} and base cover other problems on {dataset}")
            per_part["test"] = (before.to_numpy(float), after.to_numpy(float), after.index.astype(str))
        frame = train_metrics.get(run)
        for part in ("heldout", "own"):
            column = "rewards" if objective == "max@1" else objective  # max@1: the mean reward
            ends = measured_endpoints(frame, part, column) if frame is not None else None
            if ends is not None:
                per_part[part] = (*ends, pd.Index([str(i) for i in range(len(ends[0]))]))
        for part, (before, after, index) in per_part.items():
            d = after - before
            effect, low, high = _interval(d, seed, f"{part}:{run}", boot)
            row.update({f"{part}_before": float(before.mean()), f"{part}_after": float(after.mean()),
                        f"{part}_effect": effect, f"{part}_ci_low": low, f"{part}_ci_high": high,
                        f"{part}_n": len(d),
                        f"{part}_detectable": detectable_effect(d, alpha=alpha, power=power)})  # fmt: skip
            if differences is not None:
                differences[f"learned:{part}:{run}"] = pd.Series(d, index=index, name=run)
        row["learned"] = None if "test" not in per_part else bool(row["test_ci_low"] > 0)
        best = best_tempered(metrics, yardstick, dataset, objective) if yardstick else None
        if best is not None and "test" in per_part:
            row.update(tempered_model=best[0], tempered_value=best[1],
                       tempered_effect=row["test_after"] - best[1])  # fmt: skip
        row.update(_paper_effect(paper_lookup, cfg["claims"].get("paper_dataset"), run, settings, metric, k))
        row["off_policy"] = needs(settings["method"]).uses_deltas and int(settings["num_iterations"]) > 1
        if row["off_policy"]:
            reg = regime(frame, limits)
            row.update(regime_iteration=reg["iteration"], clamped_frac=reg["clamped_frac"],
                       median_abs_delta=reg["median_abs_delta"], regime_ok=reg["ok"])  # fmt: skip
        row["gate"] = _gate(row, limits)
        rows.append(row)
    return pd.DataFrame(rows, columns=list(LEARNING_COLUMNS))


def _paper_effect(
    lookup: Callable[[str, str, str, int], tuple[str, float] | None] | None,
    dataset: str | None,
    run: str,
    settings: Mapping,
    metric: str,
    k: int,
) -> dict:
    """The paper's run (this run's name, else its estimator) and base model at ``metric@k`` on the paper's
    ``dataset``: ``paper_before``, ``paper_after``, ``paper_effect``, ``paper_table`` (empty where the
    paper does not report both)."""
    if not (lookup and dataset):
        return {}
    base = lookup("base", dataset, metric, k)
    found = lookup(run, dataset, metric, k) or lookup(settings["method"], dataset, metric, k)
    if base is None or found is None:
        return {}
    tables = found[0] if found[0] == base[0] else f"{found[0]}, {base[0]}"
    return {"paper_before": base[1], "paper_after": found[1], "paper_effect": found[1] - base[1],
            "paper_table": tables}  # fmt: skip


def _gate(row: Mapping, limits: Mapping) -> str | None:
    """Why a claim on this run cannot be read, or None."""
    run, objective = row["run"], row["objective"]
    if row["learned"] is None:
        return f"{run}'s {objective} was not measured on {row['dataset']}"
    if not row["learned"]:
        return f"{run} did not raise {objective}" + _resolution(row)
    if row["off_policy"]:
        if row["regime_ok"] is None:
            return f"{run}'s off-policy regime was not measured"
        if not row["regime_ok"]:
            clamped, median = float(limits["max_clamped_frac"]), float(limits["max_median_abs_delta"])
            return (
                f"{run} is outside the first-order regime ({row['clamped_frac']:.0%} of deltas clamped, "
                f"median |delta| {row['median_abs_delta']:.3f}; limits {clamped:.0%}, {median:.3f})"
            )
    return None


def _resolution(row: Mapping) -> str:
    """Beside "did not raise": the paper's own effect at the objective against the smallest effect the
    test set detects, so a reader sees whether the paper's effect could have been seen here at all
    ("" where either is unknown)."""
    paper, detectable = row.get("paper_effect"), row.get("test_detectable")
    if _missing(paper) or _missing(detectable):
        return ""
    side = "below" if float(paper) < float(detectable) else "above"
    return (
        f" (the paper's own effect, {fmt_number(paper, 3)}, is {side} the "
        f"{fmt_number(detectable, 3, signed=False)} this test set detects)"
    )


def gates(table: pd.DataFrame) -> dict[str, str | None]:
    """``{run: reason a claim on it cannot be read, or None}`` from ``learning_table``."""
    return {r["run"]: (r["gate"] if isinstance(r["gate"], str) else None) for r in table.to_dict("records")}


def _missing(v: object) -> bool:
    """None or NaN: a cell with nothing measured (``learning.csv`` reads empty cells back as NaN)."""
    return v is None or (isinstance(v, float) and math.isnan(v))


def fmt_number(v: object, decimals: int, signed: bool = True) -> str:
    """``v`` with ``decimals`` decimals (a sign unless ``signed`` is False); "" for None or NaN."""
    if _missing(v):
        return ""
    return f"{float(v):+.{decimals}f}" if signed else f"{float(v):.{decimals}f}"


def fmt_interval(effect: object, low: object, high: object, decimals: int) -> str:
    """``+e [+low, +high]``, each signed with ``decimals`` decimals."""
    return f"{fmt_number(effect, decimals)} [{fmt_number(low, decimals)}, {fmt_number(high, decimals)}]"


def _part_cell(r: Mapping, part: str, decimals: int) -> str:
    e = r[f"{part}_effect"]
    if _missing(e):
        return "not measured"
    low, high = r[f"{part}_ci_low"], r[f"{part}_ci_high"]
    cell = fmt_interval(e, low, high, decimals)
    before = fmt_number(r[f"{part}_before"], decimals, signed=False)
    after = fmt_number(r[f"{part}_after"], decimals, signed=False)
    detectable = fmt_number(r.get(f"{part}_detectable"), decimals, False)
    return f"{'**' + cell + '**' if low > 0 else cell} ({before} -> {after}; detectable {detectable or '?'})"


def _paper_cell(r: Mapping, decimals: int) -> str:
    e = r.get("paper_effect")
    if _missing(e):
        return "not reported"
    before = fmt_number(r["paper_before"], decimals, signed=False)
    after = fmt_number(r["paper_after"], decimals, signed=False)
    return f"{fmt_number(e, decimals)} ({before} -> {after})"


def _tempered_cell(r: Mapping, decimals: int) -> str:
    if _missing(r.get("tempered_effect")):
        return "not measured"
    value = fmt_number(r["tempered_value"], decimals, signed=False)
    return f"{fmt_number(r['tempered_effect'], decimals)} (vs {r['tempered_model']}, {value})"


def render_learning(
    table: pd.DataFrame,
    decimals: int,
    *,
    confidence: float,
    power: float,
    paper_dataset: str | None = None,
) -> list[str]:
    """The per-run section of ``claims.md`` (lines); with ``paper_dataset``, a column of the paper's own
    effect at each run's objective on that dataset."""
    if table.empty:
        return []
    paper = [f"paper ({paper_dataset}): run - base"] if paper_dataset else []
    tempered_column = "tempered_model" in table and table["tempered_model"].notna().any()
    yardstick = ["test set: run - base at its best temperature"] if tempered_column else []
    head = ["run", "own objective", "test set: run - base", *paper, *yardstick, "held-out pool: last - first",
            "own training prompts: last - first", "off-policy regime (last PPO iteration)",
            "claims on it"]  # fmt: skip
    lines = [
        "## What each run learned",
        "",
        "Each run's own objective (the quantity its estimator optimises), with a "
        f"{confidence:.0%} paired bootstrap interval over problems; bold: above zero; detectable: the "
        f"smallest true effect whose interval excludes zero with {power:.0%} power at this size (normal "
        'approximation), below which "did not raise" cannot tell a small gain from none. A claim is '
        "read only where every run it compares raised its own objective on the test set and, for an "
        "off-policy run, stayed in the first-order regime its derivation assumes."
        + (
            " best temperature: the base or the base re-tempered (`base_T{t}`) with the highest mean at the"
            " run's objective; the test of run > it is the run's yardstick claim below."
            if tempered_column
            else ""
        ),
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for r in table.to_dict("records"):
        if r["off_policy"]:
            if _missing(r["clamped_frac"]):
                reg = "not measured"
            else:
                med = fmt_number(r["median_abs_delta"], 3, False) or "?"
                state = {True: "inside", False: "OUTSIDE", None: "not measured"}[r["regime_ok"]]
                reg = f"{state}: {float(r['clamped_frac']):.0%} clamped, median abs(delta) {med}"
        else:
            reg = "on-policy" if not needs(r["method"]).uses_deltas else "on-policy (1 PPO iteration)"
        gate = r["gate"] if isinstance(r["gate"], str) else "readable"
        cells = [f"`{r['run']}`", r["objective"], _part_cell(r, "test", decimals),
                 *([_paper_cell(r, decimals)] if paper_dataset else []),
                 *([_tempered_cell(r, decimals)] if tempered_column else []),
                 _part_cell(r, "heldout", decimals), _part_cell(r, "own", decimals), reg, gate]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]
