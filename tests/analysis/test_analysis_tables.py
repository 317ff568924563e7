"""Tables: hand-computed cells, colour gradient, marks, star, clamped k, LaTeX shape and compile."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest
from conftest import DATASETS, LABELS
from guard import HANG_GUARD_S

from maxk.analysis.tables import (
    TableSpec,
    build_table,
    gradient_colors,
    latex_escape,
    render_csv,
    render_latex,
    render_markdown,
    table_specs,
)
from maxk.config import with_defaults


def _frame(values: dict[str, list[float]], n: int = 4) -> pd.DataFrame:
    ids = [f"q{i}" for i in range(len(next(iter(values.values()))))]
    return pd.DataFrame({"problem_id": ids, "n": n, **values})


def test_gradient_endpoints_midpoint_and_constant():
    assert gradient_colors([0.0, 0.5, 1.0]) == ["FFFFFF", "ABDDC5", "57BB8A"]
    # scale-free: only the position within the column's range matters
    assert gradient_colors([0.30, 0.31, 0.32]) == ["FFFFFF", "ABDDC5", "57BB8A"]
    assert gradient_colors([0.2, 0.2]) == ["FFFFFF", "FFFFFF"]


def test_hand_computed_cells_marks_and_colours():
    frames = {
        ("a", "d"): _frame({"max@1": [0.0, 0.2, 0.4], "max@2": [0.5, 0.5, 0.5]}),
        ("b", "d"): _frame({"max@1": [1.0, 0.8, 0.6], "max@2": [0.0, 0.0, 0.3]}),
        ("c", "d"): _frame({"max@1": [0.4, 0.4, 0.4], "max@2": [0.2, 0.2, 0.2]}),
    }
    spec = TableSpec("t", "cap", ("a", "b", "c"), ("d",), ("max",), (1, 2))
    res = build_table(spec, frames, resamples=50)
    values = [[c.value for c in row] for row in res.cells]
    np.testing.assert_allclose(values, [[0.2, 0.5], [0.8, 0.1], [0.4, 0.2]])
    assert [c.bold for c in (res.cells[0][0], res.cells[1][0], res.cells[2][0])] == [False, True, False]
    assert [c.underline for c in (res.cells[0][0], res.cells[1][0], res.cells[2][0])] == [False, False, True]
    assert res.cells[0][1].bold and res.cells[2][1].underline
    # column max@1: min 0.2 white, max 0.8 green, 0.4 one third of the way:
    # 255 + (87-255)/3 = 199 (C7), 255 + (187-255)/3 = 232.3 (E8), 255 + (138-255)/3 = 216 (D8)
    assert res.cells[0][0].color == "FFFFFF" and res.cells[1][0].color == "57BB8A"
    assert res.cells[2][0].color == gradient_colors([0.2, 0.8, 0.4])[2] == "C7E8D8"
    tex = render_latex(res, {}, {"d": {"label": "D"}})
    assert r"\cellcolor[HTML]{57BB8A}\textbf{0.800}" in tex
    assert r"\cellcolor[HTML]{C7E8D8}\underline{0.400}" in tex


def test_ties_share_marks():
    frames = {
        (m, "d"): _frame({"max@1": v}) for m, v in {"a": [0.5, 0.5], "b": [0.5, 0.5], "c": [0.1, 0.1]}.items()
    }
    res = build_table(TableSpec("t", "", ("a", "b", "c"), ("d",), ("max",), (1,)), frames, resamples=20)
    assert [row[0].bold for row in res.cells] == [True, True, False]
    assert [row[0].underline for row in res.cells] == [False, False, True]


def test_star_only_when_best_is_significantly_better(frames):
    spec = TableSpec(
        "sig", "", ("weak", "mid", "strong"), ("ds_a", "ds_b"), ("max",), (8,), significance=True
    )
    res = build_table(spec, frames, resamples=100)
    assert len(res.tests) == 2
    for t in res.tests:
        assert t["best"] == "strong" and t["second"] == "mid"
        assert t["pvalue"] < 1e-3 and t["pvalue_holm"] >= t["pvalue"]
    assert all(res.cells[2][j].star for j in range(2))
    assert not any(res.cells[r][j].star for r in (0, 1) for j in range(2))
    # the two best nearly equal: no star
    close = dict(frames)
    close[("mid", "ds_a")] = frames[("strong", "ds_a")].assign(
        **{"max@8": frames[("strong", "ds_a")]["max@8"] - 1e-4}
    )
    spec_a = TableSpec("sig", "", ("weak", "mid", "strong"), ("ds_a",), ("max",), (8,), significance=True)
    res2 = build_table(spec_a, close, resamples=20)
    assert res2.tests[0]["second"] == "mid"
    star_p = res2.tests[0]["pvalue_holm"]
    assert res2.cells[2][0].star == (star_p < 0.05)


def test_clamped_k_is_flagged_and_deduplicated(frames):
    spec = TableSpec("full", "", ("weak", "strong"), ("ds_a",), ("pass",), (1, 16, 128, 256))
    res = build_table(spec, frames, resamples=20)
    assert [(c.k, c.k_requested) for c in res.columns] == [(1, 1), (16, 16)]
    spec = TableSpec("t2", "", ("weak", "strong"), ("ds_a",), ("max",), (1, 128))
    res = build_table(spec, frames, resamples=20)
    assert [(c.k, c.k_requested, c.clamped) for c in res.columns] == [(1, 1, False), (16, 128, True)]
    tex = render_latex(res, LABELS, DATASETS)
    assert r"max@16$^\dagger$" in tex and "max@128 requested" in tex


def _balanced(tex: str) -> None:
    begins = re.findall(r"\\begin\{(\w+)\}", tex)
    ends = re.findall(r"\\end\{(\w+)\}", tex)
    assert begins == list(reversed(ends))
    depth = 0
    for ch in tex.replace(r"\{", "").replace(r"\}", ""):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        assert depth >= 0
    assert depth == 0


@pytest.mark.parametrize("layout", ["grouped", "datasets", "metrics"])
def test_latex_is_well_formed(frames, layout):
    ds, ks = {
        "grouped": (("ds_a", "ds_b"), (1, 8)),
        "datasets": (("ds_a", "ds_b"), (8,)),
        "metrics": (("ds_a",), (1, 2, 4)),
    }[layout]
    spec = TableSpec(
        "t", "A caption.", ("weak", "mid", "strong"), ds, ("max",), ks, significance=True, resize=True
    )
    res = build_table(spec, frames, resamples=20)
    tex = render_latex(res, LABELS, DATASETS)
    _balanced(tex)
    lines = tex.splitlines()
    assert lines.index(r"\toprule") < lines.index(r"\midrule") < lines.index(r"\bottomrule")
    body = lines[lines.index(r"\midrule") + 1 : lines.index(r"\bottomrule")]
    assert len(body) == 3 and all(
        line.endswith(r"\\") and len(re.findall(r"(?<!\\)&", line)) == len(res.columns) for line in body
    )
    assert tex.count(r"\cellcolor[HTML]") == 3 * len(res.columns)
    assert tex.count(r"\textbf{") == len(res.columns)
    assert r"Mid \& co" in tex and r"Weak\_model" in tex
    if layout == "grouped":
        assert r"\multirow{2}{*}{Method}" in tex and r"\multicolumn{2}{c}{Data A}" in tex
    if layout == "datasets":
        assert r"Method & \multicolumn{1}{l}{A} & \multicolumn{1}{l}{B} \\" in tex
        assert re.search(r"\\textbf\{0\.\d{3}\*\}", tex)


def test_markdown_and_csv(frames):
    spec = TableSpec(
        "t", "cap", ("weak", "mid", "strong"), ("ds_a", "ds_b"), ("pass", "max"), (1, 4), significance=True
    )
    res = build_table(spec, frames, resamples=200)
    md = render_markdown(res, LABELS, DATASETS).splitlines()
    table = [line for line in md if line.startswith("|")]
    assert len(table) == 2 + 3 and all(line.count("|") == 2 + len(res.columns) for line in table)
    assert "**" in table[-1] and "<u>" in table[-2]
    csv = render_csv(res, LABELS)
    assert len(csv) == 3 * len(res.columns)
    assert (csv["ci_low"] <= csv["value"]).all() and (csv["value"] <= csv["ci_high"]).all()
    assert (csv["ci_high"] > csv["ci_low"]).any()
    best = csv[csv["star"]]
    assert set(best["model"]) == {"strong"} and best["pvalue"].notna().all()
    # value of a cell equals the mean of the per-problem metric
    row = csv[(csv.model == "mid") & (csv.dataset == "ds_b") & (csv.metric == "pass") & (csv.k == 4)]
    assert row["value"].iloc[0] == pytest.approx(frames[("mid", "ds_b")]["pass@4"].mean())


def test_specs_from_config_generate_full_tables():
    cfg = {
        "datasets": DATASETS,
        "tables": {"t1": {"rows": ["a"], "datasets": ["ds_a"], "metrics": ["max"], "ks": [1]}},
        "full_tables": {"rows": ["a", "b"], "metrics": ["pass", "max"], "ks": [1, 2]},
    }
    names = [s.name for s in table_specs(with_defaults("analysis", cfg))]
    assert names == ["t1", "full_pass_ds_a", "full_max_ds_a", "full_pass_ds_b", "full_max_ds_b"]
    assert latex_escape("a_b & 50%") == r"a\_b \& 50\%"


def test_mismatched_problems_are_an_error():
    frames = {("a", "d"): _frame({"max@1": [0.1, 0.2]}), ("b", "d"): _frame({"max@1": [0.1, 0.2, 0.3]})}
    with pytest.raises(ValueError, match="different problems"):
        build_table(TableSpec("t", "", ("a", "b"), ("d",), ("max",), (1,)), frames, resamples=10)


@pytest.mark.skipif(
    shutil.which("pdflatex") is None, reason="pdflatex not installed (apt-get install texlive-latex-extra)"
)
def test_latex_compiles_with_pdflatex(frames, tmp_path):
    doc = [
        r"\documentclass{article}",
        r"\usepackage{booktabs,multirow,graphicx}",
        r"\usepackage[table]{xcolor}",
        r"\begin{document}",
    ]
    for i, (ds, ks, sig) in enumerate(
        [
            (("ds_a", "ds_b"), (1, 8), False),
            (("ds_a", "ds_b"), (8,), True),
            (("ds_a",), (1, 2, 4, 8, 16, 128), False),
        ]
    ):
        spec = TableSpec(
            f"t{i}",
            r"Caption with $\max@128$.",
            ("weak", "mid", "strong"),
            ds,
            ("max",),
            ks,
            significance=sig,
            resize=i == 2,
        )
        doc.append(render_latex(build_table(spec, frames, resamples=20), LABELS, DATASETS))
    doc.append(r"\end{document}")
    (tmp_path / "t.tex").write_text("\n".join(doc), encoding="utf-8")
    proc = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "t.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert (tmp_path / "t.pdf").stat().st_size > 1000


def test_row_labels_override_model_labels_per_table() -> None:
    from maxk.analysis.tables import table_specs

    cfg = {
        "models": {"base": "Base model", "grpo_continuous": "GRPO"},
        "datasets": {"d": {"label": "D"}},
        "tables": {
            "t1": {"rows": ["base", "grpo_continuous"], "datasets": ["d"], "metrics": ["pass"], "ks": [1],
                   "row_labels": {"grpo_continuous": "Continuous reward"}},
            "t4": {"rows": ["grpo_continuous"], "datasets": ["d"], "metrics": ["max"], "ks": [1]},
        },
    }  # fmt: skip
    t1, t4 = table_specs(with_defaults("analysis", cfg))
    assert t1.labels(cfg["models"]) == {"base": "Base model", "grpo_continuous": "Continuous reward"}
    assert t4.labels(cfg["models"])["grpo_continuous"] == "GRPO"
