"""The transcribed paper numbers (``maxk/analysis/paper_results.yaml``) against the paper's LaTeX."""

from __future__ import annotations

import copy
import re
from collections import Counter
from pathlib import Path

import pytest

from maxk.analysis.paper_results import (
    check_against_latex,
    load_paper_results,
    paper_lookup,
    paper_value,
    parse_latex_tables,
)

_TEX_CANDIDATES = [
    Path(__file__).resolve().parents[3] / "shared/paper/best-of-n-worlds.tex",
    Path("/work/shared/paper/best-of-n-worlds.tex"),
]
LABELS = ["tab:binary-reward", "tab:max_at_128", "tab:max@1", "tab:more-epochs"] + [
    f"tab:full_{ds}_{metric}" for ds in ["cc", "lcb", "lb", "cf", "mbpp"] for metric in ["pass", "max"]
]


@pytest.fixture(scope="module")
def tex() -> str:
    path = next((p for p in _TEX_CANDIDATES if p.is_file()), None)
    if path is None:
        pytest.skip(f"paper LaTeX source not found (looked at {', '.join(map(str, _TEX_CANDIDATES))})")
    return path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def results() -> dict:
    return load_paper_results()


def test_yaml_layout(results):
    assert list(results["tables"]) == [f"table{i}" for i in range(1, 15)]
    assert [spec["label"] for spec in results["tables"].values()] == LABELS
    ids = set(results["methods"].values())
    assert results["methods"]["RL PPO=3 one epoch"] == results["methods"]["Continuous reward"]
    assert set(results["datasets"]) == {"CC", "LCB", "LB", "CF", "MBPP"}
    for spec in results["tables"].values():
        assert set(spec["values"]) <= ids
        for by_ds in spec["values"].values():
            assert set(by_ds) <= set(results["datasets"])
            for by_metric in by_ds.values():
                assert all(re.fullmatch(r"(pass|max)@\d+", m) for m in by_metric)
                assert all(isinstance(v, float) and 0 <= v <= 1 for v in by_metric.values())


def test_yaml_matches_latex_both_ways(tex, results):
    assert check_against_latex(tex, results) == []


def test_latex_parser_finds_every_table(tex):
    tables = parse_latex_tables(tex)
    assert set(LABELS) <= set(tables)
    assert tables["tab:max_at_128"].starred == [
        ["Off-policy BoN (ours)", ds] for ds in ["CC", "LCB", "CF", "MBPP"]
    ]


def test_every_number_of_each_tabular_is_transcribed(tex, results):
    """Parser-free: the multiset of decimals in each tabular equals the YAML's numbers for it."""
    for spec in results["tables"].values():
        env = re.search(
            r"\\begin\{tabular\}((?:(?!\\begin\{tabular\}).)*?)\\end\{tabular\}(?:(?!\\end\{table\}).)*"
            + re.escape(f"\\label{{{spec['label']}}}"),
            tex,
            flags=re.S,
        )
        assert env, spec["label"]
        in_tex = Counter(float(x) for x in re.findall(r"(?<![\w.])\d+\.\d+", env[1]))
        in_yaml = Counter(
            v for by_ds in spec["values"].values() for by_m in by_ds.values() for v in by_m.values()
        )
        assert in_tex == in_yaml, spec["label"]


def test_spot_values(results):
    assert paper_value("table1", "base", "CC", "pass", 1) == 0.211
    assert paper_value("table2", "offpolicy_bon", "MBPP", "max", 128) == 0.710
    assert paper_value("table4", "grpo_e4_ppo3", "LCB", "max", 128) == 0.627
    assert paper_value("table4", "grpo_continuous", "CC", "max", 1) == 0.401
    assert paper_value("table11", "base", "CF", "pass", 1) == 0.010
    assert paper_value("table14", "offpolicy_bon", "MBPP", "max", 256) == 0.750
    assert paper_value("table1", "base", "CC", "pass", 2) is None
    assert paper_value("table99", "base", "CC", "pass", 1) is None
    assert results["tables"]["table2"]["starred"] == [
        ["offpolicy_bon", ds] for ds in ["CC", "LCB", "CF", "MBPP"]
    ]


def test_tables_agree_where_they_overlap(results):
    """The same (method, dataset, metric@k) reported in two tables has the same value."""
    seen: dict[tuple[str, str, str], set[float]] = {}
    for spec in results["tables"].values():
        for method, by_ds in spec["values"].items():
            for ds, by_metric in by_ds.items():
                for metric, v in by_metric.items():
                    seen.setdefault((method, ds, metric), set()).add(v)
    assert {key: vs for key, vs in seen.items() if len(vs) > 1} == {}


def test_lookup():
    assert paper_lookup("offpolicy_bon", "CC", "max", 128) == ("table2", 0.718)
    assert paper_lookup("base", "CC", "pass", 1) == ("table1", 0.211)
    assert paper_lookup("bon_mean", "LB", "pass", 256) == ("table9", 0.294)
    assert paper_lookup("grpo_binary", "MBPP", "pass", 1) is None


def test_check_catches_errors(tex, results):
    altered = copy.deepcopy(results)
    altered["tables"]["table2"]["values"]["offpolicy_bon"]["MBPP"]["max@128"] = 0.711
    assert check_against_latex(tex, altered) == [
        "table2 ('offpolicy_bon', 'MBPP', 'max@128'): yaml 0.711 != latex 0.71"
    ]
    missing = copy.deepcopy(results)
    del missing["tables"]["table5"]["values"]["bon_loo1"]["CC"]["pass@64"]
    assert len(check_against_latex(tex, missing)) == 1
    relabelled = copy.deepcopy(results)
    relabelled["methods"]["BoN mean"] = "bon_loo1"
    assert check_against_latex(tex, relabelled)
    unstarred = copy.deepcopy(results)
    unstarred["tables"]["table2"]["starred"].pop()
    assert check_against_latex(tex, unstarred)


def test_parser_on_a_small_table():
    tex = r"""
    \begin{table}\begin{tabular}{lrr}\toprule
    \multirow{2}{*}{Method} & \multicolumn{2}{c}{LiveBench} \\
     & \multicolumn{1}{l}{pass@1} & \multicolumn{1}{l}{max@4} \\ \midrule
    Base model & \cellcolor[HTML]{FFFFFF}0.100 & \textbf{ 0.200* } \\
    BoN mean & \underline{0.300} & 0.400 \\ \bottomrule
    \end{tabular}\caption{x}\label{tab:x}\end{table}
    """
    table = parse_latex_tables(tex)["tab:x"]
    assert table.values == {
        "Base model": {"LB": {"pass@1": 0.1, "max@4": 0.2}},
        "BoN mean": {"LB": {"pass@1": 0.3, "max@4": 0.4}},
    }
    assert table.starred == [["Base model", "LB"]]
