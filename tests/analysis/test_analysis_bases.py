"""`maxk analyze bases`: one row per base model, from its manifest, weights, curve and edge manifest."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import pytest

from maxk.analysis.bases import (
    COLUMNS,
    BaseModelError,
    base_rows,
    late_loss,
    read_base,
    render_markdown,
)
from maxk.cli import main


def manifest(pass_at_1: float = 0.0974, gain: float = 0.0286, capability: str = "AVX512") -> dict:
    """A base's manifest.json as ``maxk.train.base`` writes it (the keys the table reads, and some)."""
    items = [
        {"band": [0.1, 0.35], "name": "pass_at_1", "pass": pass_at_1 >= 0.1, "value": pass_at_1},
        {"band": [2.0, None], "name": "pass_at_64_over_pass_at_1", "pass": True, "value": 4.973},
        {"band": [0.25, 0.45], "name": "mean_reward", "pass": True, "value": 0.2682},
        {"band": [0.03, None], "name": "sharpen_gain_pass_at_1", "pass": gain >= 0.03, "value": gain},
    ]
    return {
        "calibration": {"items": items, "passes": all(i["pass"] for i in items)},
        "eval": {"dataset": "suite_test", "mean_reward": 0.2682, "pass@1": pass_at_1, "pass@64": 0.48},
        "eval_sharpened": {"pass@1": round(pass_at_1 + gain, 4), "temperature": 0.5},
        "sft_steps": 900,
        "torch": {"cpu_capability": capability, "threads": 2},
    }


def base_dir(
    path: Path,
    seed: int,
    *,
    weights: bytes = b"weights",
    record: dict | None = None,
    curve: list[tuple[int, float]] | None = None,
    edge: int | None = None,
) -> Path:
    """A base model directory at ``path``; with ``curve`` / ``edge``, its SFT curve and edge manifest
    beside it in the seed's directory (``path`` = .../seed{seed}/models/base)."""
    path.mkdir(parents=True)
    (path / "manifest.json").write_text(json.dumps(record or manifest()))
    (path / "provenance.json").write_text(json.dumps({"seeds": {"seed": seed}, "git_commit": "abc"}))
    (path / "model.safetensors").write_bytes(weights)
    root = path.parent.parent
    if curve is not None:
        (root / "metrics" / "train").mkdir(parents=True)
        lines = ["step,epoch,loss,mean_token_accuracy"] + [f"{s},0.0,{loss},0.5" for s, loss in curve]
        (root / "metrics" / "train" / "base.csv").write_text("\n".join(lines) + "\n")
    if edge is not None:
        (root / "data").mkdir(parents=True)
        (root / "data" / "suite_rl.edge.manifest.json").write_text(
            json.dumps({"count": edge, "examined": 750})
        )
    return path


#: an SFT curve logged at step 1 and every 10 steps to 900: loss 1.0 up to step 800, then steps
#: 810..900 at 0.10, 0.11, ..., 0.19 (mean 0.145); step 800 (outside the last 100 steps) at 5.0
CURVE = [(1, 1.0), *((s, 1.0) for s in range(10, 800, 10)), (800, 5.0)]
CURVE += [(810 + 10 * i, 0.10 + 0.01 * i) for i in range(10)]


def tree(root: Path, seeds: list[int]) -> Path:
    """A results/ directory with a base per seed (each its own weights, curve and edge manifest)."""
    for seed in seeds:
        base_dir(root / f"seed{seed}" / "models" / "base", seed, weights=f"w{seed}".encode(), curve=CURVE,
                 edge=200 + seed)  # fmt: skip
    return root


def test_row_values(tmp_path: Path) -> None:
    path = base_dir(tmp_path / "seed1234" / "models" / "base", 1234, curve=CURVE, edge=225)
    row = read_base(path, "x")
    assert (row.label, row.seed, row.base_seed, row.path) == ("x", 1234, 1234, str(path))
    assert row.sha256 == hashlib.sha256(b"weights").hexdigest()
    assert row.cpu_capability == "AVX512"
    assert row.pass_at_1 == 0.0974 and row.mean_reward == 0.2682
    assert row.sharpen_gain == 0.0286
    assert row.misses == (("pass_at_1", 0.0974), ("sharpen_gain_pass_at_1", 0.0286))
    assert row.sft_late_loss == pytest.approx(0.145)  # steps 810..900, not step 800
    assert row.edge_prompts == 225
    md = render_markdown([row])
    assert "| x | 1234 | " in md
    assert f"`{row.sha256[:8]}`" in md and row.sha256 not in md
    assert (
        "| 0.097 | 0.268 | 0.029 | misses pass_at_1 0.097, sharpen_gain_pass_at_1 0.029 | 0.145 | 225 |" in md
    )
    assert md.splitlines()[0].startswith("Base models") and "manifest.json" in md.splitlines()[0]


def test_late_loss_is_the_last_100_steps(tmp_path: Path) -> None:
    every = tmp_path / "every.csv"  # logged every step: exactly the last 100 rows
    every.write_text(
        "step,loss\n" + "".join(f"{s},{1000.0 if s <= 50 else float(s)}\n" for s in range(1, 151))
    )
    assert late_loss(every) == pytest.approx(sum(range(51, 151)) / 100)
    assert late_loss(tmp_path / "absent.csv") is None
    bad = tmp_path / "bad.csv"
    bad.write_text("step,accuracy\n1,0.5\n")
    with pytest.raises(BaseModelError, match=r"bad\.csv: field 'loss'"):
        late_loss(bad)


def test_all_pass_and_no_sharpen_item(tmp_path: Path) -> None:
    record = manifest(pass_at_1=0.2, gain=0.07)
    row = read_base(base_dir(tmp_path / "b", 3, record=record), "b")
    assert row.misses == () and "| all pass |" in render_markdown([row])
    record["calibration"]["items"] = record["calibration"]["items"][:3]  # the sharpen check not run
    row = read_base(base_dir(tmp_path / "c", 3, record=record), "c")
    assert row.sharpen_gain is None


def test_two_seeds_in_seed_order(tmp_path: Path) -> None:
    root = tree(tmp_path / "run" / "results", [1234, 2])
    rows = base_rows([root])
    assert [r.seed for r in rows] == [2, 1234]
    assert [r.label for r in rows] == ["run", "run"]  # default: the tree's parent directory
    assert [r.edge_prompts for r in rows] == [202, 1434]
    assert rows[0].sha256 == hashlib.sha256(b"w2").hexdigest()


def test_a_base_directory_directly(tmp_path: Path) -> None:
    path = base_dir(tmp_path / "models" / "base", 1234)
    (row,) = base_rows([path])
    assert (row.label, row.seed, row.path) == (str(path), 1234, str(path))  # labelled by its path
    (row,) = base_rows([path], ["shipped"])
    assert row.label == "shipped"


def test_missing_optional_files_give_empty_cells(tmp_path: Path) -> None:
    path = base_dir(tmp_path / "results" / "seed2" / "models" / "base", 2)  # no curve, no edge manifest
    (row,) = base_rows([tmp_path / "results"])
    assert row.sft_late_loss is None and row.edge_prompts is None
    last = render_markdown([row]).splitlines()[-1]
    assert last.endswith("| 0.029 | misses pass_at_1 0.097, sharpen_gain_pass_at_1 0.029 |  |  |")
    assert row.path == str(path)


@pytest.mark.parametrize(
    ("damage", "field"),
    [
        (lambda m: m.pop("eval"), "'eval'"),
        (lambda m: m["eval"].pop("pass@1"), "'eval.pass@1'"),
        (lambda m: m.pop("calibration"), "'calibration'"),
        (lambda m: m["torch"].pop("cpu_capability"), "'torch.cpu_capability'"),
    ],
)
def test_bad_manifest_names_file_and_field(tmp_path: Path, damage, field: str) -> None:
    record = manifest()
    damage(record)
    path = base_dir(tmp_path / "seed1" / "models" / "base", 1, record=record)
    with pytest.raises(BaseModelError, match=f"manifest.json: field {field}") as exc:
        base_rows([tmp_path])
    assert exc.value.path == str(path / "manifest.json")
    assert isinstance(exc.value, ValueError)


def test_missing_files_and_bad_inputs(tmp_path: Path) -> None:
    path = base_dir(tmp_path / "b", 1)
    (path / "model.safetensors").unlink()
    with pytest.raises(BaseModelError, match=r"model\.safetensors"):
        read_base(path, "b")
    (path / "provenance.json").write_text("[]")
    with pytest.raises(BaseModelError, match=r"provenance\.json: not a JSON object"):
        read_base(path, "b")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BaseModelError, match="no seed"):
        base_rows([tmp_path / "empty"])
    with pytest.raises(ValueError, match="labels"):
        base_rows([path], ["a", "b"])


def test_cli_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = tree(tmp_path / "a" / "results", [1234, 2])
    shipped = base_dir(tmp_path / "models" / "base", 1234)
    md, out = tmp_path / "out" / "bases.md", tmp_path / "out" / "bases.csv"
    argv = ["analyze", "bases", str(a), str(shipped), "--label", "x", "--label", "shipped"]
    assert main([*argv, "--md", str(md), "--csv", str(out)]) == 0
    assert capsys.readouterr().out == f"wrote {md} and {out}\n"
    text = md.read_text()
    assert text.count("| x |") == 2 and text.count("| shipped |") == 1
    with open(out, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == list(COLUMNS)
    assert [(r["label"], r["seed"]) for r in rows] == [("x", "2"), ("x", "1234"), ("shipped", "1234")]
    assert rows[0]["sha256"] == hashlib.sha256(b"w2").hexdigest()
    assert rows[0]["sft_late_loss"] == "0.145" and rows[0]["edge_prompts"] == "202"
    assert rows[2]["sft_late_loss"] == "" and rows[2]["edge_prompts"] == ""
    assert rows[0]["calibration"] == "misses pass_at_1 0.0974, sharpen_gain_pass_at_1 0.0286"
    assert main(argv) == 0  # no --md: the Markdown printed
    assert capsys.readouterr().out == text
    assert main([*argv[:3], "--label", "x", "--label", "y"]) == 1  # one RESULTS, two labels
    record = manifest()
    del record["eval"]
    base_dir(tmp_path / "bad" / "seed1" / "models" / "base", 1, record=record)
    assert main(["analyze", "bases", str(tmp_path / "bad")]) == 1
    assert "manifest.json: field 'eval'" in capsys.readouterr().err
