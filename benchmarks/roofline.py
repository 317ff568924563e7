"""Each hot path's share of its roofline, as a table: runs the benchmarks that measure one and writes
their numbers into ``docs/experiments.md`` (between the ``roofline:begin`` and ``roofline:end`` markers).

    python benchmarks/roofline.py [--model models/base] [--data-dir results/data]
        [--write]

Runs, one after another on an otherwise idle machine (each prints a ``ROOFLINE {...}`` line):
``bench_generate.py`` (the decode loop at the pipeline's shapes), ``bench_update.py`` (the policy
update, shared prompts in length runs) and ``bench_sft.py`` (the base model's SFT step). A hot path's
roofline is the FLOP/s that its own matrix products reach at its own shapes when timed alone on the
same threads; its share is the useful FLOP/s it achieves (no padding, each prompt once) over that.
Without ``--write`` the table is only printed.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- roofline:begin -->", "<!-- roofline:end -->"


def default_model() -> str:
    """The base the embedded default samples (``base_model.path`` of ``config/config.yaml``:
    ``models/base``), under the repository when it is there (a shipped base), else as given (a hub id)."""
    from maxk import paths as P
    from maxk.config import load_config

    cfg = load_config()
    path = P.model_path(cfg, cfg["seed"], P.BASE)
    return str(ROOT / path) if (ROOT / path).exists() else path


def linear_flop_per_token(cfg) -> int:
    """2 x the weights of every linear layer of a Qwen2 ``cfg`` (lm_head included): one token's forward
    matrix products."""
    h, inter, layers = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    kv = cfg.num_key_value_heads * (h // cfg.num_attention_heads)
    return 2 * (layers * (2 * h * h + 2 * h * kv + 3 * h * inter) + h * cfg.vocab_size)


def training_roofline(model, rows: int, seconds: float = 2.0) -> float:
    """FLOP/s of every linear layer's forward product and its two backward products (input gradient,
    weight gradient) at ``rows`` rows, timed alone, best of repeats: a training step's roofline."""
    import torch

    weights = [m.weight.detach() for m in model.modules() if isinstance(m, torch.nn.Linear)]
    xs = [torch.randn(rows, w.shape[1]) for w in weights]
    gs = [torch.randn(rows, w.shape[0]) for w in weights]
    flops = sum(3 * 2 * rows * w.shape[0] * w.shape[1] for w in weights)
    best, end = float("inf"), time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        for x, g, w in zip(xs, gs, weights, strict=True):
            x @ w.t(), g @ w, g.t() @ x
        best = min(best, time.perf_counter() - t0)
    return flops / best


def roofline_line(path: str, shape: str, achieved: float, roof: float) -> None:
    """Print the line ``measure`` reads: one hot path's useful FLOP/s and its roofline's."""
    print("ROOFLINE " + json.dumps({"path": path, "shape": shape, "achieved": achieved, "roofline": roof}))


def measure(command: list[str]) -> dict:
    """The ``ROOFLINE`` line of one benchmark run (its whole output on failure)."""
    run = subprocess.run([sys.executable, *command], cwd=ROOT, capture_output=True, text=True)
    for line in run.stdout.splitlines():
        if line.startswith("ROOFLINE "):
            return json.loads(line.removeprefix("ROOFLINE ")) | {"command": "python " + " ".join(command)}
    raise SystemExit(
        f"{' '.join(command)} printed no ROOFLINE line (rc {run.returncode}):\n{run.stdout}{run.stderr}"
    )


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), or what ``platform`` knows."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    found = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    return found.group(1).strip() if found else platform.machine()


def table(rows: list[dict]) -> str:
    """The markdown table of the measured hot paths, with the machine and code it ran on."""
    import torch

    commit = subprocess.run(  # "-dirty": measured on uncommitted changes
        ["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True
    )
    lines = [
        "| hot path | shape | achieved | roofline | share | command |",
        "|---|---|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['path']} | {r['shape']} | {r['achieved'] / 1e9:.1f} GFLOP/s | "
            f"{r['roofline'] / 1e9:.1f} GFLOP/s | {r['achieved'] / r['roofline']:.0%} | `{r['command']}` |"
        )
    lines += [
        "",
        f"CPU: {cpu_name()}; torch {torch.__version__} ({torch.backends.cpu.get_cpu_capability()}); code "
        f"`{commit.stdout.strip() or 'unknown'}`. Written by `python benchmarks/roofline.py --write`.",
    ]
    return "\n".join(lines)


def write(path: Path, text: str) -> None:
    """Replace the text between the markers of ``path`` with ``text``."""
    doc = path.read_text()
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"{path}: no {BEGIN} ... {END} block to write into")
    head, rest = doc.split(BEGIN, 1)
    path.write_text(f"{head}{BEGIN}\n{text}\n{END}{rest.split(END, 1)[1]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--model",
        default=None,
        help="the base model (default: the config's, models/base; relative: to the repository root)",
    )
    ap.add_argument(
        "--data-dir",
        default="results/data",
        help="where the suite's splits are (relative: to the repository root)",
    )
    ap.add_argument("--write", action="store_true", help="write the table into docs/experiments.md")
    a = ap.parse_args()
    model = ["--model", a.model] if a.model else []
    data = Path(a.data_dir)  # relative to the repository, where the benchmarks run (``measure``)
    test, rl, sft = (str(data / f"suite_{part}.jsonl.gz") for part in ("test", "rl", "sft"))
    missing = [p for p in (test, rl, sft) if not (ROOT / p).is_file()]
    if missing:
        raise SystemExit(
            f"roofline: no {', '.join(missing)} (the suite's splits, which `snakemake --cores all` writes): "
            "run the default, or pass --data-dir"
        )
    rows = [
        measure(
            ["benchmarks/bench_generate.py", *model, "--problems-file", test, "--baseline-problems", "1"]
        ),
        measure(["benchmarks/bench_update.py", *model, "--data", rl, "--runs", "4"]),
        measure(["benchmarks/bench_sft.py", "--data", sft, "--steps", "20"]),
    ]
    text = table(rows)
    print(text)
    if a.write:
        write(ROOT / "docs/experiments.md", text)


if __name__ == "__main__":
    main()
