"""The paper's published numbers (tables 1-14) as data, and a tiny parser of its LaTeX tables.

``paper_results.yaml`` (next to this module) holds every numeric cell of the paper's tables:
``tables.<name>.values[method_id][dataset][metric@k] = float``, where ``method_id`` is our run
id (the ``methods`` map translates the paper's row labels) and ``dataset`` a short key
(CC, LCB, LB, CF, MBPP). ``check_against_latex`` compares it with the LaTeX source both ways,
using ``parse_latex_tables``: each ``\\label{tab:...}``'s tabular, its header cells resolved to
(dataset, metric@k) per column, with the caption filling in what the header leaves out
(tables 2-3 give the metric only in the caption, tables 5-14 the dataset).
"""

from __future__ import annotations

import copy
import functools
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import yaml

__all__ = [
    "LatexTable",
    "check_against_latex",
    "load_paper_results",
    "paper_lookup",
    "paper_value",
    "parse_latex_tables",
]

# Dataset names as the paper writes them (headers, captions) -> our short keys.
DATASET_NAMES = {
    "CC": "CC", "Code Contests": "CC", "CodeContests": "CC",
    "LCB": "LCB", "LiveCodeBench": "LCB",
    "LB": "LB", "LiveBench": "LB",
    "CF": "CF", "CodeForces": "CF",
    "MBPP": "MBPP",
}  # fmt: skip
_METRIC = re.compile(r"\b(pass|max)@(\d+)\b")


@functools.cache
def _load() -> dict[str, Any]:
    text = resources.files("maxk.analysis").joinpath("paper_results.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def load_paper_results() -> dict[str, Any]:
    """The YAML as a dict (a fresh copy: callers may modify it)."""
    return copy.deepcopy(_load())


def paper_value(table: str, method: str, dataset: str, metric: str, k: int) -> float | None:
    """The paper's ``metric@k`` of ``method`` on ``dataset`` in ``table`` (e.g. "table2"), or None."""
    values = _load()["tables"].get(table, {}).get("values", {})
    return values.get(method, {}).get(dataset, {}).get(f"{metric}@{k}")


def paper_lookup(method: str, dataset: str, metric: str, k: int) -> tuple[str, float] | None:
    """``(table, value)`` from the first of table1..table14 that reports this number, or None."""
    for table in sorted(_load()["tables"], key=lambda name: int(name.removeprefix("table"))):
        value = paper_value(table, method, dataset, metric, k)
        if value is not None:
            return table, value
    return None


# --- LaTeX ----------------------------------------------------------------------------------------


@dataclass
class LatexTable:
    """One labelled LaTeX table: ``values[row label][dataset][metric@k]`` and its starred cells."""

    label: str
    caption: str
    values: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    starred: list[list[str]] = field(default_factory=list)  # [row label, dataset]


def _unwrap(cell: str) -> list[str]:
    """A cell's text without markup; a ``\\multicolumn{n}`` cell becomes n copies."""
    span = 1
    if m := re.match(r"\s*\\multicolumn\{(\d+)\}\{[^}]*\}\{(.*)\}\s*$", cell):
        span, cell = int(m[1]), m[2]
    cell = re.sub(r"\\multirow\{[^}]*\}\{[^}]*\}\{(.*)\}", r"\1", cell)
    cell = re.sub(r"\\cellcolor\[[^]]*\]\{[^}]*\}", "", cell)
    cell = re.sub(r"\\(?:textbf|underline)\{([^}]*)\}", r"\1", cell)
    return [cell.strip()] * span


def _tabular_rows(body: str) -> list[list[str]]:
    body = re.sub(r"\\(?:toprule|midrule|bottomrule|hline)", "", body)
    rows = [[c for cell in row.split("&") for c in _unwrap(cell)] for row in body.split("\\\\")]
    return [row for row in rows if any(row)]


def _number(cell: str) -> float | None:
    try:
        return float(cell.rstrip("*"))
    except ValueError:
        return None


def parse_latex_tables(tex: str) -> dict[str, LatexTable]:
    """Every ``table`` environment with a ``\\label`` and a tabular, keyed by label."""
    tex = re.sub(r"(?<!\\)%.*", "", tex)
    out = {}
    for env in re.findall(r"\\begin\{table\}(.*?)\\end\{table\}", tex, flags=re.S):
        label = re.search(r"\\label\{([^}]*)\}", env)
        tabular = re.search(r"\\begin\{tabular\}\{[^}]*\}(.*?)\\end\{tabular\}", env, flags=re.S)
        if not (label and tabular):
            continue
        caption = re.search(r"\\caption\{(.*?)\}\s*\\label", env, flags=re.S)
        caption_text = caption[1].replace("\\", "") if caption else ""
        table = out[label[1]] = LatexTable(label[1], caption_text)
        rows = _tabular_rows(tabular[1])
        header = [row for row in rows if _number(row[-1]) is None]
        # Columns 1..n: dataset and metric@k from the header, else from the caption.
        caption_ds = [v for name, v in DATASET_NAMES.items() if re.search(rf"\b{name}\b", caption_text)]
        caption_metric = _METRIC.search(caption_text)
        columns = []
        for j in range(1, max(len(row) for row in rows)):
            cells = [row[j] for row in header if j < len(row)]
            ds = next((DATASET_NAMES[c] for c in cells if c in DATASET_NAMES), None)
            metric = next((m[0] for c in cells if (m := _METRIC.fullmatch(c))), None)
            ds = ds or (caption_ds[0] if len(set(caption_ds)) == 1 else None)
            metric = metric or (caption_metric[0] if caption_metric else None)
            columns.append((ds, metric))
        for row in rows:
            if row in header:
                continue
            for (ds, metric), cell in zip(columns, row[1:], strict=True):
                if ds is None or metric is None:
                    raise ValueError(f"{label[1]}: cannot tell the dataset/metric of a column")
                table.values.setdefault(row[0], {}).setdefault(ds, {})[metric] = float(cell.rstrip("*"))
                if cell.endswith("*"):
                    table.starred.append([row[0], ds])
    return out


def check_against_latex(tex: str, results: dict[str, Any] | None = None) -> list[str]:
    """Differences between the YAML (or ``results``) and the LaTeX tables; empty when they agree.

    Checks both ways: every YAML number equals the cell of the table with the same label, and
    every numeric cell of those tables is in the YAML (rows mapped through ``methods``).
    """
    results = results if results is not None else _load()
    latex = parse_latex_tables(tex)
    problems = []
    for name, spec in results["tables"].items():
        if spec["label"] not in latex:
            problems.append(f"{name}: no table labelled {spec['label']} in the LaTeX")
            continue
        table = latex[spec["label"]]
        expected: dict[tuple[str, str, str], float] = {}
        for row, by_ds in table.values.items():
            method = results["methods"].get(row)
            if method is None:
                problems.append(f"{name}: row {row!r} has no entry in `methods`")
                continue
            for ds, by_metric in by_ds.items():
                expected |= {(method, ds, metric): v for metric, v in by_metric.items()}
        got = {
            (method, ds, metric): float(v)
            for method, by_ds in spec["values"].items()
            for ds, by_metric in by_ds.items()
            for metric, v in by_metric.items()
        }
        for key in sorted(expected.keys() | got.keys()):
            if expected.get(key) != got.get(key):
                problems.append(f"{name} {key}: yaml {got.get(key)} != latex {expected.get(key)}")
        starred = sorted([results["methods"].get(row), ds] for row, ds in table.starred)
        if "starred" in spec and sorted(spec["starred"]) != starred:
            problems.append(f"{name}: starred {spec['starred']} != latex {starred}")
    return problems
