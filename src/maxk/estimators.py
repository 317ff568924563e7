"""What each advantage estimator needs and aims at: the registry's constraints, without torch.

The estimator functions live in ``maxk.objectives`` (torch), which binds each to its entry here
(``maxk.objectives.register``). Planning (``maxk.train.launch.check_run``, run by every ``snakemake``
call) and the analysis read these constraints from here, so they need not import torch; the trainer
reads the same entries through ``maxk.objectives.estimator``. Each constraint is declared once, below.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NEEDS", "OBJECTIVES", "REWARD_KINDS", "EstimatorNeeds", "declare", "needs"]

#: Reward kinds a training run can optimise (``train.reward_kind``): the fraction of tests passed, or
#: 1 if all pass else 0.
REWARD_KINDS: tuple[str, ...] = ("continuous", "binary")

#: What an estimator optimises (``EstimatorNeeds.objective``): the mean reward (max@1), max@k at the
#: run's ``bon_k``, or max@n over its ``num_generations`` samples (BoN-max rewards the best of the n
#: it draws).
OBJECTIVES: tuple[str, ...] = ("max@1", "max@k", "max@n")


@dataclass(frozen=True)
class EstimatorNeeds:
    """What an advantage estimator needs (verl's ``register_adv_est`` carries names; this carries the
    constraints too), so the trainer's and the config's checks read them here and nowhere else.

    ``min_k``: None when it takes no subset size; else the smallest k it is defined for (k <= n, the
    group size, always). ``uses_deltas``: off-policy, its advantages depend on the importance-ratio
    deltas ``rho - 1`` (and ``delta_clamp``, ``own_ratio``), recomputed at every PPO iteration.
    ``reward_kinds``: the rewards it is meant for. ``objective`` (``OBJECTIVES``): what a run trained
    with it should raise, read by the per-run learning check (``maxk.analysis.learning``).
    """

    name: str
    min_k: int | None = None
    uses_deltas: bool = False
    reward_kinds: tuple[str, ...] = REWARD_KINDS
    objective: str = "max@1"

    @property
    def needs_k(self) -> bool:
        return self.min_k is not None

    def check(self, *, k: int | None, n: int, reward_kind: str, what: str = "bon_k") -> None:
        """Raise ValueError unless ``k`` (when it takes one) is in ``[min_k, n]`` and ``reward_kind`` is
        one it is meant for; ``what`` names the setting in the message."""
        if reward_kind not in self.reward_kinds:
            raise ValueError(f"{self.name}: reward_kind {reward_kind!r} not in {self.reward_kinds}")
        if self.min_k is not None and (k is None or not self.min_k <= k <= n):
            raise ValueError(f"{self.name}: {what}={k} must be in [{self.min_k}, num_generations={n}]")


#: name -> its needs, in declaration order (the order of ``maxk.objectives.ESTIMATORS``).
NEEDS: dict[str, EstimatorNeeds] = {}


def declare(
    name: str,
    *,
    min_k: int | None = None,
    uses_deltas: bool = False,
    reward_kinds: tuple[str, ...] = REWARD_KINDS,
    objective: str | None = None,
) -> EstimatorNeeds:
    """Add ``name``'s needs to ``NEEDS``; ``objective`` defaults to max@k where it takes a k, else
    max@1. ValueError on a second declaration, ``min_k < 1`` or an unknown objective."""
    if name in NEEDS:
        raise ValueError(f"advantage estimator {name!r} registered twice")
    if min_k is not None and min_k < 1:
        raise ValueError(f"{name}: min_k must be >= 1, got {min_k}")
    aim = objective or ("max@1" if min_k is None else "max@k")
    if aim not in OBJECTIVES:
        raise ValueError(f"{name}: objective must be one of {OBJECTIVES}, got {aim!r}")
    NEEDS[name] = EstimatorNeeds(name, min_k, uses_deltas, tuple(reward_kinds), aim)
    return NEEDS[name]


def needs(method: str) -> EstimatorNeeds:
    """The needs of ``method``; ValueError naming the known ones otherwise."""
    try:
        return NEEDS[method]
    except KeyError:
        known = ", ".join(NEEDS)
        raise ValueError(f"unknown advantage method {method!r}; known: {known}") from None


# The paper's six (section 4.3, appendix A), then the ones beyond it (maxk.objectives says which is which).
declare("grpo")
declare("bon_max_mean", objective="max@n")
declare("bon_max_second", objective="max@n")
declare("bon_loo1", min_k=2)
declare("bon_mean", min_k=1)
declare("offpolicy_bon", min_k=1, uses_deltas=True)
declare("offpolicy_bon_exact", min_k=1, uses_deltas=True)
declare("offpolicy_bon_onstd", min_k=1, uses_deltas=True)
declare("offpolicy_bon_exact_onstd", min_k=1, uses_deltas=True)
declare("bon_subset_std", min_k=1)
declare("bon_mean_centered", min_k=1)
