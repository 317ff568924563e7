"""Base models side by side: one row per built base, read from what its build wrote.

``maxk analyze bases`` tabulates the base models of one or more results trees (every
``results/seed{seed}/models/base``) and of base model directories named directly (e.g. the shipped
``models/base``), so the base tables of ``docs/experiments.md`` come from one command instead of by
hand from the manifests. Per base:

- from ``manifest.json`` (``maxk.train.base``): ``pass@1`` and ``mean_reward`` of its ``eval`` block
  (the calibration's evaluation set at temperature 1), ``torch.cpu_capability`` (the ATen kernel path it
  was built on), the sharpen gain (the ``calibration.items`` entry whose name starts with
  ``sharpen_gain``: pass@1 at the sharpened temperature minus pass@1 at 1; empty when the check was not
  run) and the calibration items that miss their band;
- from ``provenance.json``: the seed it was built with (``seeds.seed``);
- the SHA-256 of ``model.safetensors`` (two bases with the same digest are the same weights);
- beside it in its seed's directory, when the files exist (else an empty cell): the mean SFT training
  loss over the last ``LATE_STEPS`` steps of its curve (``maxk.paths.base_curve``: the logged rows whose
  ``step`` is above the last step minus ``LATE_STEPS``; each logged row is the mean over its logging
  interval, so at the default 10 the rows 810-900 cover steps 801-900) and the count of RL prompts the
  prompt filter kept at its edge of competence (``count`` of the shared filter's manifest,
  ``maxk.paths.edge_prompts`` with ``ext=".manifest.json"``).

Pure functions over the files; errors are ``BaseModelError`` (a ``ValueError``) naming the file and
the field.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from maxk.data.source import sha256_file
from maxk.paths import BASE, base_curve, edge_prompts, seed_dir

__all__ = [
    "COLUMNS",
    "LATE_STEPS",
    "RL_DATASET",
    "BaseModelError",
    "BaseRow",
    "base_rows",
    "calibration_text",
    "csv_record",
    "edge_count",
    "find_bases",
    "late_loss",
    "read_base",
    "render_markdown",
    "seed_root",
    "sha256_of",
    "sharpen_gain",
]

#: The SFT steps the late loss is the mean over (the last ones of the curve).
LATE_STEPS = 100
#: The RL pool whose edge-of-competence filter is counted (``train.dataset`` of the default config).
RL_DATASET = "suite_rl"
#: The files a base model directory must hold.
MANIFEST, PROVENANCE, WEIGHTS = "manifest.json", "provenance.json", "model.safetensors"
#: Columns of the CSV, in order.
COLUMNS = (
    "label",
    "seed",
    "base_seed",
    "path",
    "sha256",
    "cpu_capability",
    "pass_at_1",
    "mean_reward",
    "sharpen_gain",
    "calibration",
    "sft_late_loss",
    "edge_prompts",
)
_SEED_DIR = re.compile(r"seed(\d+)")


class BaseModelError(ValueError):
    """A base model's file that is missing, unreadable or lacks a field; the message names both."""

    def __init__(self, path: str | Path, problem: str, field: str | None = None) -> None:
        self.path, self.field = str(path), field
        super().__init__(f"{path}: {f'field {field!r}: ' if field else ''}{problem}")


@dataclass(frozen=True)
class BaseRow:
    """One base model's readings. ``seed``: its seed directory's (``results/seed{seed}``), else the
    seed it was built with; ``base_seed``: the seed it was built with (``provenance.json``); ``misses``:
    each calibration item outside its band, ``(name, value)``; ``sft_late_loss`` and ``edge_prompts``:
    None where the file is absent."""

    label: str
    seed: int
    base_seed: int
    path: str
    sha256: str
    cpu_capability: str
    pass_at_1: float
    mean_reward: float
    sharpen_gain: float | None
    misses: tuple[tuple[str, float | None], ...]
    sft_late_loss: float | None
    edge_prompts: int | None


def _read_json(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; BaseModelError when it is missing, not JSON or not an object."""
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        raise BaseModelError(path, "not found (a base model directory holds it)") from None
    except (OSError, ValueError) as exc:
        raise BaseModelError(path, f"cannot read it as JSON: {exc}") from exc
    if not isinstance(record, dict):
        raise BaseModelError(path, f"not a JSON object but {type(record).__name__}")
    return record


def _field(record: Mapping[str, Any], path: Path, dotted: str) -> Any:
    """``record``'s value at the dotted key (``"eval.pass@1"`` is ``record["eval"]["pass@1"]``);
    BaseModelError naming ``path`` and the field when a key is missing."""
    value: Any = record
    keys = dotted.split(".")
    for i, key in enumerate(keys):
        if not isinstance(value, Mapping) or key not in value:
            raise BaseModelError(path, "missing", ".".join(keys[: i + 1]))
        value = value[key]
    return value


def _number(record: Mapping[str, Any], path: Path, dotted: str) -> float:
    value = _field(record, path, dotted)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BaseModelError(path, f"not a number: {value!r}", dotted)
    return float(value)


def _items(manifest: Mapping[str, Any], path: Path) -> list[Mapping[str, Any]]:
    """The calibration items (``maxk.train.base.calibration``), each with a ``name``, ``pass`` and a
    ``value`` that is a number or null."""
    items = _field(manifest, path, "calibration.items")
    if not isinstance(items, list):
        raise BaseModelError(path, f"not a list: {items!r}", "calibration.items")
    for i, item in enumerate(items):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) or "pass" not in item:
            field = f"calibration.items[{i}]"
            raise BaseModelError(path, f"an item without a name and pass: {item!r}", field)
        value = item.get("value")
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise BaseModelError(path, f"not a number: {value!r}", f"calibration.items[{i}].value")
    return items


def sharpen_gain(items: Sequence[Mapping[str, Any]]) -> float | None:
    """The value of the calibration item whose name starts with ``sharpen_gain``; None without one."""
    for item in items:
        if item["name"].startswith("sharpen_gain"):
            value = item.get("value")
            return None if value is None else float(value)
    return None


def calibration_text(misses: Sequence[tuple[str, float | None]], decimals: int | None = None) -> str:
    """The calibration cell: ``all pass``, or ``misses NAME VALUE, ...`` (each value at ``decimals``,
    or as recorded)."""
    if not misses:
        return "all pass"

    def value(v: float | None) -> str:
        if v is None:
            return "n/a"
        return f"{v:.{decimals}f}" if decimals is not None else f"{v:g}"

    return "misses " + ", ".join(f"{name} {value(v)}" for name, v in misses)


def sha256_of(path: Path) -> str:
    """The hex SHA-256 of a file's bytes; BaseModelError when it cannot be read."""
    try:
        return sha256_file(path)
    except OSError as exc:
        raise BaseModelError(path, f"cannot read it: {exc.strerror or exc}") from exc


def late_loss(curve: Path, steps: int = LATE_STEPS) -> float | None:
    """The mean ``loss`` of the curve's logged rows whose ``step`` is above its last step minus
    ``steps`` (the last ``steps`` training steps); None when the file does not exist. Rows without a
    loss are skipped; BaseModelError when the columns are missing or a value is not a number."""
    if not curve.is_file():
        return None
    try:
        with open(curve, newline="") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in ("step", "loss") if c not in (reader.fieldnames or [])]
            if missing:
                raise BaseModelError(curve, "no such column", missing[0])
            rows = []
            for line, row in enumerate(reader, start=2):
                if not (row.get("loss") or "").strip():
                    continue
                try:
                    rows.append((float(row["step"]), float(row["loss"])))
                except (TypeError, ValueError):
                    raise BaseModelError(curve, f"line {line}: not a number", "step/loss") from None
    except OSError as exc:
        raise BaseModelError(curve, f"cannot read it: {exc.strerror or exc}") from exc
    if not rows:
        return None
    last = max(step for step, _ in rows)
    late = [loss for step, loss in rows if step > last - steps]
    return math.fsum(late) / len(late)


def edge_count(manifest: Path) -> int | None:
    """The number of RL prompts the prompt filter kept (``count`` of its manifest); None when the file
    does not exist."""
    if not manifest.is_file():
        return None
    count = _field(_read_json(manifest), manifest, "count")
    if isinstance(count, bool) or not isinstance(count, int):
        raise BaseModelError(manifest, f"not an integer: {count!r}", "count")
    return count


def seed_root(base_dir: Path) -> tuple[Path, int] | None:
    """``(results/seed{seed}, seed)`` when ``base_dir`` is that seed's ``models/base``; else None."""
    base_dir = Path(os.path.abspath(base_dir))
    models = base_dir.parent
    m = _SEED_DIR.fullmatch(models.parent.name)
    if base_dir.name != BASE or models.name != "models" or not m:
        return None
    return models.parent, int(m.group(1))


def _beside(root: Path, seed: int, path: str) -> Path:
    """``path`` (``maxk.paths``, under ``seed_dir(seed)``) under the seed directory ``root``."""
    return root / Path(path).relative_to(seed_dir(seed))


def read_base(base_dir: Path, label: str, *, rl_dataset: str = RL_DATASET) -> BaseRow:
    """One base model directory's row (module docstring); the curve and the edge manifest are read
    from its seed's directory when it is ``.../seed{seed}/models/base``."""
    manifest_path, provenance_path = base_dir / MANIFEST, base_dir / PROVENANCE
    manifest, provenance = _read_json(manifest_path), _read_json(provenance_path)
    _field(manifest, manifest_path, "eval")
    base_seed = _field(provenance, provenance_path, "seeds.seed")
    if isinstance(base_seed, bool) or not isinstance(base_seed, int):
        raise BaseModelError(provenance_path, f"not an integer: {base_seed!r}", "seeds.seed")
    items = _items(manifest, manifest_path)
    misses = tuple(
        (str(i["name"]), None if i.get("value") is None else float(i["value"]))
        for i in items
        if not i["pass"]
    )
    found = seed_root(base_dir)
    seed, loss, edge = base_seed, None, None
    if found is not None:
        root, seed = found
        loss = late_loss(_beside(root, seed, base_curve(seed)))
        edge = edge_count(_beside(root, seed, edge_prompts(seed, rl_dataset, ext=".manifest.json")))
    return BaseRow(
        label=label,
        seed=seed,
        base_seed=base_seed,
        path=str(base_dir),
        sha256=sha256_of(base_dir / WEIGHTS),
        cpu_capability=str(_field(manifest, manifest_path, "torch.cpu_capability")),
        pass_at_1=_number(manifest, manifest_path, "eval.pass@1"),
        mean_reward=_number(manifest, manifest_path, "eval.mean_reward"),
        sharpen_gain=sharpen_gain(items),
        misses=misses,
        sft_late_loss=loss,
        edge_prompts=edge,
    )


def find_bases(results_dir: Path) -> list[Path]:
    """Every ``seed{seed}/models/base`` under a results directory, in increasing seed order."""
    found = []
    for path in results_dir.glob(f"seed*/models/{BASE}"):
        m = _SEED_DIR.fullmatch(path.parent.parent.name)
        if m and path.is_dir():
            found.append((int(m.group(1)), path))
    return [path for _, path in sorted(found)]


def _is_base_dir(path: Path) -> bool:
    return (path / MANIFEST).is_file()


def base_rows(
    results_dirs: Sequence[str | Path],
    labels: Sequence[str] | None = None,
    *,
    rl_dataset: str = RL_DATASET,
) -> list[BaseRow]:
    """The rows of every base model, in the order given: for a results directory, each of its
    ``seed*/models/base`` in seed order, labelled with its label (default: the results directory's
    parent directory's name, as ``maxk analyze side-by-side``); for a base model directory (it holds
    ``manifest.json``), its row, labelled with its label (default: its path as given)."""
    if labels and len(labels) != len(results_dirs):
        raise ValueError(f"{len(results_dirs)} directories but {len(labels)} labels")
    rows = []
    for i, given in enumerate(results_dirs):
        path = Path(given)
        if _is_base_dir(path):
            rows.append(read_base(path, labels[i] if labels else str(given), rl_dataset=rl_dataset))
            continue
        if not path.is_dir():
            raise BaseModelError(path, "not a directory")
        bases = find_bases(path)
        if not bases:
            what = "a results/ or a base model directory?"
            raise BaseModelError(path, f"no seed*/models/{BASE}/ in it and no {MANIFEST} ({what})")
        label = labels[i] if labels else path.resolve().parent.name
        rows += [read_base(b, label, rl_dataset=rl_dataset) for b in bases]
    return rows


def _num(value: float | int | None, fmt: str) -> str:
    return "" if value is None else format(value, fmt)


def csv_record(row: BaseRow) -> dict[str, str]:
    """The CSV's cells of one row (``COLUMNS``): values as recorded, the full SHA-256, the late loss to
    6 significant digits, absent readings empty."""
    return {
        "label": row.label,
        "seed": str(row.seed),
        "base_seed": str(row.base_seed),
        "path": row.path,
        "sha256": row.sha256,
        "cpu_capability": row.cpu_capability,
        "pass_at_1": _num(row.pass_at_1, "g"),
        "mean_reward": _num(row.mean_reward, "g"),
        "sharpen_gain": _num(row.sharpen_gain, "g"),
        "calibration": calibration_text(row.misses),
        "sft_late_loss": _num(row.sft_late_loss, ".6g"),
        "edge_prompts": _num(row.edge_prompts, "d"),
    }


def render_markdown(rows: Sequence[BaseRow], *, decimals: int = 3, rl_dataset: str = RL_DATASET) -> str:
    """One Markdown table, a row per base, after a caption line saying what each column is and where
    it is read from."""
    f = f".{decimals}f"
    caption = (
        "Base models (`maxk analyze bases`). Columns: label (the results tree's, or the base directory's); "
        "seed (its `results/seed{seed}`; in parentheses the seed it was built with, `provenance.json` "
        "`seeds.seed`, where that differs); path (the base directory); sha256 (of `model.safetensors`, "
        "first 8 hex digits); CPU (`manifest.json` `torch.cpu_capability`, the ATen kernel path); pass@1 "
        "and mean reward (`manifest.json` `eval`, the calibration's evaluation set at temperature 1); "
        "sharpen gain (its calibration item `sharpen_gain_*`: pass@1 at the sharpened temperature minus at "
        "1); calibration (`manifest.json` `calibration.items` outside their band, with their values); "
        f"SFT loss, last {LATE_STEPS} steps (the mean training loss of the curve "
        f"`metrics/train/{BASE}.csv` beside it over its last {LATE_STEPS} steps); RL prompts at the edge "
        f"(`count` of the prompt filter's `data/{rl_dataset}.edge.manifest.json` beside it). Empty: the file "
        "is absent."
    )
    header = {  # name: right-aligned (a number)
        "label": False,
        "seed": True,
        "path": False,
        "sha256": False,
        "CPU": False,
        "pass@1": True,
        "mean reward": True,
        "sharpen gain": True,
        "calibration": False,
        f"SFT loss, last {LATE_STEPS} steps": True,
        "RL prompts at the edge": True,
    }
    rule = "|" + "".join("---:|" if right else "---|" for right in header.values())
    lines = [caption, "", "| " + " | ".join(header) + " |", rule]
    for r in rows:
        seed = str(r.seed) if r.seed == r.base_seed else f"{r.seed} ({r.base_seed})"
        cells = [
            r.label,
            seed,
            f"`{r.path}`",
            f"`{r.sha256[:8]}`",
            r.cpu_capability,
            _num(r.pass_at_1, f),
            _num(r.mean_reward, f),
            _num(r.sharpen_gain, f),
            calibration_text(r.misses, decimals),
            _num(r.sft_late_loss, f),
            _num(r.edge_prompts, "d"),
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"
