"""Benchmark: batched max@k / pass@k and the advantage transforms vs straightforward per-item loops.

    python benchmarks/bench_estimators.py [--problems 10000] [--n 256] [--groups 4096]

Prints each timing and the speed-up over the baseline measured in the same process. The baselines
are what one writes without this module: a per-problem loop computing the appendix-C formula with
scipy's ``comb`` (as in the paper's Listing 1), and a per-group loop building the n x n weight
matrix of eq. 8 built once (as in Listing 2) and applied group by group for the BoN transform.
Last, the exact off-policy transform (``offpolicy_bon_rewards_exact``, O(n k) per group; literal
enumeration is out of reach at this size) at n = 256, k = 128 over 512 groups, against the paper's
first-order transform on the same data: the price of exactness.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from scipy.special import comb

from maxk.metrics import max_at_k_batch, pass_at_k_batch, powers_of_two
from maxk.objectives import (
    ESTIMATORS,
    compute_advantages,
    offpolicy_bon_rewards,
    offpolicy_bon_rewards_exact,
)


def timed(fn, repeat: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def loop_max_at_k(rewards: np.ndarray, ks: list[int]) -> np.ndarray:
    out = np.empty((rewards.shape[0], len(ks)))
    n = rewards.shape[1]
    for p, row in enumerate(rewards):
        s = np.sort(row)
        for j, k in enumerate(ks):
            out[p, j] = comb(np.arange(n), k - 1) @ s / comb(n, k)
    return out


def loop_bon_rewards(rewards: torch.Tensor, k: int) -> torch.Tensor:
    """Per-group loop with the n x n weight matrix of eq. 8 built once (vectorised, as Listing 2)."""
    n = rewards.shape[1]
    idx = torch.arange(1, n + 1, dtype=torch.float64)
    den = comb(n, k)
    off = torch.as_tensor(comb(idx - 2, k - 2) / den).nan_to_num(0)  # C(j-2, k-2) for column j
    w = torch.triu(off.repeat(n, 1), diagonal=1)  # w[i, j] for j > i
    w += torch.diag(torch.as_tensor(comb(idx - 1, k - 1) / den).nan_to_num(0))
    w = w.to(rewards.dtype)
    out = torch.empty_like(rewards)
    for g in range(rewards.shape[0]):
        r, order = torch.sort(rewards[g])
        out[g, order] = w @ r
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", type=int, default=10_000)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--groups", type=int, default=4096)
    ap.add_argument("--baseline-problems", type=int, default=500, help="loop baseline runs on this many")
    ap.add_argument("--baseline-groups", type=int, default=512)
    args = ap.parse_args()
    torch.set_num_threads(2)
    rng = np.random.default_rng(0)
    rewards = rng.integers(0, 11, size=(args.problems, args.n)) / 10.0
    ks = powers_of_two(args.n)

    t_fast = timed(lambda: max_at_k_batch(rewards, ks), repeat=3)
    sub = rewards[: args.baseline_problems]
    t_loop = timed(lambda: loop_max_at_k(sub, ks)) * args.problems / len(sub)
    np.testing.assert_allclose(max_at_k_batch(sub, ks), loop_max_at_k(sub, ks), atol=1e-9)
    print(
        f"max@k  {args.problems}x{args.n}, {len(ks)} ks: batched {t_fast * 1e3:8.1f} ms | "
        f"per-problem loop {t_loop * 1e3:9.1f} ms (extrapolated) | speed-up {t_loop / t_fast:7.1f}x"
    )
    t_pass = timed(lambda: pass_at_k_batch(rewards == 1.0, ks), repeat=3)
    print(f"pass@k {args.problems}x{args.n}, {len(ks)} ks: batched {t_pass * 1e3:8.1f} ms")

    width = max(map(len, ESTIMATORS))
    for n in (8, 64):
        r = torch.rand(args.groups, n, dtype=torch.float32)
        k = 4 if n == 8 else 16
        for method, spec in ESTIMATORS.items():  # every registered estimator, in registration order
            kw = {"k": max(k, spec.min_k)} if spec.needs_k else {}
            if spec.uses_deltas:
                kw["deltas"] = torch.randn_like(r) * 0.05
            t = timed(lambda m=method, kw=kw, r=r: compute_advantages(m, r, **kw), repeat=5)
            print(f"advantages {method:{width}s} {args.groups}x{n}: {t * 1e3:7.2f} ms")
        rb = r[: args.baseline_groups].double()
        t_bon = timed(lambda r=r, k=k: compute_advantages("bon_mean", r, k=k), repeat=5)
        t_lb = timed(lambda rb=rb, k=k: loop_bon_rewards(rb, k)) * args.groups / len(rb)
        from maxk.objectives import bon_rewards

        torch.testing.assert_close(bon_rewards(rb, k), loop_bon_rewards(rb, k))
        print(
            f"bon transform {args.groups}x{n}: per-group loop {t_lb * 1e3:9.1f} ms (extrapolated) | "
            f"speed-up {t_lb / t_bon:7.1f}x"
        )

    r = torch.rand(512, 256, dtype=torch.float64)
    d = (torch.rand(512, 256, dtype=torch.float64) - 0.5) * 0.4
    t_exact = timed(lambda: offpolicy_bon_rewards_exact(r, d, 128, own_ratio=False), repeat=3)
    t_first = timed(lambda: offpolicy_bon_rewards(r, d, 128), repeat=3)
    print(
        f"exact off-policy transform 512x256, k=128: {t_exact * 1e3:8.1f} ms | first order "
        f"{t_first * 1e3:6.1f} ms | exact / first order {t_exact / t_first:6.1f}x"
    )


if __name__ == "__main__":
    main()
