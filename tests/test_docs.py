"""The reference pages (``maxk.docs``): ``docs/cli.md`` is the parsers' rendering, ``docs/outputs.md``
names exactly the columns the code writes; and the renderer and checker themselves on small inputs."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

import pytest

from maxk import docs as D
from maxk.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
CLI_PAGE, OUTPUTS_PAGE = ROOT / "docs" / D.CLI_PAGE, ROOT / "docs" / D.OUTPUTS_PAGE


# --- the pages against the code ------------------------------------------------------------------


#: words a draft leaves where a number or a sentence is still to come
DRAFT_MARKS = re.compile(r"\b(XXX|TODO|TBD|FIXME)\b")


def _markdown_pages() -> list[Path]:
    skip = {".venv", ".git", "results", "work", "node_modules"}
    return sorted(p for p in ROOT.rglob("*.md") if not skip & set(p.relative_to(ROOT).parts))


def test_no_page_keeps_a_draft_s_placeholder() -> None:
    """A section written before its run keeps ``XXX`` where the run's numbers go; once filled, the
    placeholder lines must go (one was found published beside its filled copy, 2026-11-30)."""
    pages = _markdown_pages()
    assert any(p.name == "experiments.md" for p in pages)
    left = [
        f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
        for p in pages
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if DRAFT_MARKS.search(line)
    ]
    assert not left, "\n".join(left)


def test_the_draft_check_finds_a_placeholder_and_nothing_else() -> None:
    assert DRAFT_MARKS.search("- **One command, XXX jobs, XXX wall**")
    assert DRAFT_MARKS.search("TODO: fill in")
    assert not DRAFT_MARKS.search("download.pytorch.org/whl/cuXXX and XXXL and TODOs")


def test_the_cli_page_is_the_parsers_rendering() -> None:
    assert CLI_PAGE.read_text() == D.render_cli(build_parser()), (
        f"docs/cli.md is out of date with the parsers: run `{D.REGENERATE}` to rewrite it"
    )


def test_the_outputs_page_names_every_column_the_code_writes_and_no_other() -> None:
    problems = D.check_outputs(OUTPUTS_PAGE.read_text())
    assert problems == [], (
        "docs/outputs.md differs from the code that writes the files (document the column, or drop it; "
        f"`{D.REGENERATE}` lists the same):\n" + "\n".join(problems)
    )


def test_the_cli_page_names_every_command_and_every_option() -> None:
    text = CLI_PAGE.read_text()
    for command in D.commands(build_parser()):
        assert f"`{command.name}`" in text
        for action in command.parser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help") and len(option) > 2:
                    assert f"`{option}" in text, f"{command.name} {option}"


def test_the_cli_page_holds_nothing_of_this_machine(monkeypatch) -> None:
    """No terminal width, working directory or home directory reaches the page."""
    wide = D.render_cli(build_parser())
    monkeypatch.setenv("COLUMNS", "40")
    assert D.render_cli(build_parser()) == wide
    for mine in {os.getcwd(), str(Path.home()), str(ROOT)}:
        assert mine not in wide
    assert all(len(line) <= D.WIDTH for line in wide.splitlines() if not line.startswith("|"))


def test_the_training_catalogue_holds_every_column_the_writers_put_first() -> None:
    from maxk.train.base import CURVE_COLUMNS
    from maxk.train.logged import GRPO_KEYS, SFT_KEYS
    from maxk.train.run import METRIC_COLUMNS

    assert D.undocumented(METRIC_COLUMNS, GRPO_KEYS) == []
    assert D.undocumented(CURVE_COLUMNS, SFT_KEYS) == []


def test_the_parquet_schemas_name_the_column_constants() -> None:
    from maxk.generate.run import SAMPLE_COLUMNS, samples_schema
    from maxk.sandbox.cli import SCORE_COLUMNS, scores_schema

    assert tuple(samples_schema().names) == SAMPLE_COLUMNS
    assert tuple(scores_schema().names) == SCORE_COLUMNS


# --- the CLI renderer on a small parser ----------------------------------------------------------


def _toy() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toy", description="A ``toy`` tool.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    run = sub.add_parser("run", help="run it", description="Run it,\n   twice  over.")
    run.add_argument("kind", choices=["a", "b"], help="which one")
    run.add_argument("--seed", type=int, default=3, help="seed (default: %(default)s); 50%% of it")
    run.add_argument("--file", nargs="+", metavar="FILE", required=True, help="input | output <files>")
    run.add_argument("--tag", action="append", help="a tag")
    run.add_argument("--dry", action="store_true", help="do nothing")
    group = run.add_mutually_exclusive_group()
    group.add_argument("--json", help="as JSON")
    group.add_argument("--yaml", nargs="*", default=[], help="as YAML")
    return parser


def test_a_command_section_lists_synopsis_arguments_defaults_and_choices() -> None:
    run = next(c for c in D.commands(_toy(), ("toy",)) if c.name == "toy run")
    assert D.synopsis(run) == (
        "toy run {a,b} [--seed SEED] --file FILE [FILE ...] [--tag TAG] [--dry] "
        "[--json JSON | --yaml [YAML ...]]"
    )
    assert D.render_command(run).splitlines() == [
        "## `toy run`",
        "",
        "Run it, twice over.",
        "",
        "```text",
        D.synopsis(run),
        "```",
        "",
        "| argument | meaning | default |",
        "|---|---|---|",
        "| `kind` | which one (one of `a`, `b`) | required |",
        "| `--seed SEED` | seed (default: 3); 50% of it (an integer) | `3` |",
        r"| `--file FILE [FILE ...]` | input \| output &lt;files> | required |",
        "| `--tag TAG` | a tag (repeatable) |  |",
        "| `--dry` | do nothing | off |",
        "| `--json JSON` | as JSON (not with `--yaml`) |  |",
        "| `--yaml [YAML ...]` | as YAML (not with `--json`) |  |",
    ]


def test_the_page_indexes_every_command_and_links_its_section() -> None:
    page = D.render_cli(_toy())
    assert "| [`toy run`](#toy-run) | run it |" in page
    assert "## `toy`\n\nA `toy` tool.\n\n```text\ntoy COMMAND ...\n```" in page
    assert page.endswith("\n") and not page.endswith("\n\n")


def test_a_long_synopsis_wraps_between_arguments_never_inside_one() -> None:
    parser = argparse.ArgumentParser(prog="toy")
    for i in range(30):
        parser.add_argument(f"--option-{i}", metavar="VALUE")
    lines = D.synopsis(D.Command(("toy",), parser, None)).splitlines()
    assert len(lines) > 1 and all(len(line) <= D.WIDTH for line in lines)
    assert all(line.startswith("    [--option-") for line in lines[1:])
    assert all(line.rstrip().endswith("VALUE]") for line in lines)


def test_a_default_that_is_an_absolute_path_is_refused() -> None:
    parser = argparse.ArgumentParser(prog="toy")
    parser.add_argument("--cache", default=str(Path.home() / "cache"))
    with pytest.raises(ValueError, match="absolute path"):
        D.render_cli(parser)


# --- the outputs checker on a small page ---------------------------------------------------------

PAGE = """# files

<!-- columns: one -->
| column | type | meaning |
|---|---|---|
| `id` | string | the id |
| `pass@{k}` | number | pass@k |
| `{part}_before` | number | before |
| `paper_before` | number | the paper's |

text

<!-- columns: two -->

| column | type | meaning |
|---|---|---|
| `a` | string | a |
| `a` | string | a again |
| `gone` | string | nothing writes it |
"""


def test_documented_columns_are_read_from_the_marked_tables() -> None:
    assert D.documented_columns(PAGE) == {
        "one": ["id", "pass@{k}", "{part}_before", "paper_before"],
        "two": ["a", "a", "gone"],
    }


def test_the_checker_names_what_is_undocumented_stale_twice_or_unmarked() -> None:
    columns = {
        "one": ("id", "pass@1", "pass@16", "test_before", "own_before", "paper_before"),
        "two": ("a", "b"),
        "three": ("x",),
    }
    assert D.check_outputs(PAGE, columns) == [
        "no table marked <!-- columns: three -->",
        "two: `a` is documented twice",
        "two: `b` is written but not documented",
        "two: `gone` is documented but not written",
    ]
    assert D.check_outputs(PAGE, {**columns, "one": ("id", "pass@1", "paper_before")}) == [
        "no table marked <!-- columns: three -->",
        "one: `{part}_before` is documented but not written",
        "two: `a` is documented twice",
        "two: `b` is written but not documented",
        "two: `gone` is documented but not written",
    ]
    assert "<!-- columns: four -->: no such file in maxk.docs.output_columns" in D.check_outputs(
        PAGE + "\n<!-- columns: four -->\n", columns
    )


def test_placeholders_stand_for_their_own_values_only() -> None:
    holes = D.placeholders()
    assert D.matches("delta/clamped_frac_iter{i}", "delta/clamped_frac_iter2", holes)
    assert not D.matches("delta/clamped_frac_iter{i}", "delta/clamped_frac_iterx", holes)
    assert D.matches("{part}_ci_low", "test_ci_low", holes)
    assert not D.matches("{part}_before", "paper_before", holes)
    assert D.matches("rewards/{func}/mean", "rewards/sandbox/mean", holes)
    assert not D.matches("rewards/{func}/mean", "rewards/a/b/mean", holes)
    assert not D.matches("heldout/problem_max@{k}", "heldout/problem_max@{k}x", holes)
    assert D.matches("heldout/problem_max@{k}", "heldout/problem_max@{k}", holes)  # a pattern: itself


def test_a_marker_named_twice_is_an_error() -> None:
    with pytest.raises(ValueError, match="twice"):
        D.documented_columns(PAGE + "\n<!-- columns: one -->\n")


# --- the command ---------------------------------------------------------------------------------


def test_the_command_rewrites_the_cli_page_and_check_reports_a_stale_one(tmp_path, capsys) -> None:
    (tmp_path / D.OUTPUTS_PAGE).write_text(OUTPUTS_PAGE.read_text())
    assert D.main(["--docs", str(tmp_path), "--check"]) == 1  # no cli.md yet
    assert D.REGENERATE in capsys.readouterr().err
    assert D.main(["--docs", str(tmp_path)]) == 0
    assert (tmp_path / D.CLI_PAGE).read_text() == CLI_PAGE.read_text()
    assert D.main(["--docs", str(tmp_path), "--check"]) == 0
    (tmp_path / D.OUTPUTS_PAGE).write_text(OUTPUTS_PAGE.read_text().replace("| `tokens_match` |", "| x |"))
    assert D.main(["--docs", str(tmp_path), "--check"]) == 1
    assert "rescored: `tokens_match` is written but not documented" in capsys.readouterr().err
