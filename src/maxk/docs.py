"""The reference pages under ``docs/``: one generated from the code, one checked against it.

    python -m maxk.docs [--docs docs] [--check]

- ``docs/cli.md``: every command and subcommand of ``maxk``, with every argument's help, default and
  choices, generated from the argparse parsers (``maxk.cli.build_parser``) by ``render_cli``;
- ``docs/outputs.md``: every column of the result files, written by hand and checked by
  ``check_outputs``: the table after each ``<!-- columns: KEY -->`` marker must name exactly the
  columns of ``output_columns()[KEY]``, the code's own list (a constant of the module that writes the
  file, or, for the training metrics, ``maxk.train.logged``).

Without ``--check``, ``cli.md`` is rewritten; with it, nothing is written and a stale ``cli.md`` is an
error (the diff is printed). Either way ``outputs.md`` is checked (it is never written: its meanings are
prose). Exit 1 when a page differs from the code. ``tests/test_docs.py`` runs both checks.

The CLI page depends on nothing but the parsers: no terminal width (the synopsis is built here and
wrapped at ``WIDTH``), no working directory; a default that is an absolute path is refused, since it
would differ from machine to machine.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
import textwrap
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CLI_PAGE",
    "OUTPUTS_PAGE",
    "Command",
    "check_outputs",
    "commands",
    "documented_columns",
    "matches",
    "output_columns",
    "placeholders",
    "render_cli",
    "render_command",
    "synopsis",
    "undocumented",
]

#: the pages, relative to the docs directory
CLI_PAGE, OUTPUTS_PAGE = "cli.md", "outputs.md"
#: the width the synopses are wrapped at (the project's prose width)
WIDTH = 105
#: the command that rewrites the generated page (printed where it is stale)
REGENERATE = "python -m maxk.docs"
#: the marker before each column table of ``outputs.md``
MARKER = re.compile(r"<!--\s*columns:\s*([\w.-]+)\s*-->")


# ------------------------------------------------------------------------------------------------
# docs/cli.md: the argparse tree


@dataclass(frozen=True)
class Command:
    """One parser of the tree: its words (``("maxk", "analyze", "claims")``), the parser, and the one-line
    help its parent lists it with (None for the root)."""

    words: tuple[str, ...]
    parser: argparse.ArgumentParser
    help: str | None

    @property
    def name(self) -> str:
        return " ".join(self.words)


def _subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    """The parser's subcommand action, or None."""
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def _listed(sub: argparse._SubParsersAction) -> dict[str, str | None]:
    """Each subcommand's one-line help, by name."""
    return {a.dest: a.help for a in sub._choices_actions}


def commands(
    parser: argparse.ArgumentParser, words: tuple[str, ...] = ("maxk",), listed: str | None = None
) -> Iterator[Command]:
    """Every parser of the tree under ``parser`` (named ``words``, listed by its parent with the help
    ``listed``), depth first, in registration order, the root first."""
    yield Command(words, parser, listed)
    sub = _subcommands(parser)
    if sub is not None:
        helps = _listed(sub)
        for name, child in sub.choices.items():
            yield from commands(child, (*words, name), helps.get(name))


def _groups(parser: argparse.ArgumentParser) -> dict[argparse.Action, argparse._MutuallyExclusiveGroup]:
    """The mutually exclusive group of each argument that has one."""
    return {a: g for g in parser._mutually_exclusive_groups for a in g._group_actions}


def _arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The parser's arguments as a user gives them: not ``--help``, not the subcommand action."""
    return [
        a
        for a in parser._actions
        if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
        and a.help != argparse.SUPPRESS
    ]


def _metavar(action: argparse.Action) -> str:
    if action.metavar is not None:
        return str(action.metavar)
    if action.choices is not None:
        return "{" + ",".join(map(str, action.choices)) + "}"
    return action.dest if not action.option_strings else action.dest.upper()


def _takes_value(action: argparse.Action) -> bool:
    return action.nargs != 0


def _value(action: argparse.Action) -> str:
    """What follows the option (or stands for the positional), by ``nargs``."""
    if not _takes_value(action):
        return ""
    m, nargs = _metavar(action), action.nargs
    if nargs is None:
        return m
    if nargs == argparse.OPTIONAL:
        return f"[{m}]"
    if nargs == argparse.ZERO_OR_MORE:
        return f"[{m} ...]"
    if nargs == argparse.ONE_OR_MORE:
        return f"{m} [{m} ...]"
    if isinstance(nargs, int):
        return " ".join([m] * nargs)
    return f"{m} ..."  # argparse.REMAINDER / PARSER


def _flag(action: argparse.Action) -> str:
    """The argument as written: its longest option string and its value, or the positional's value."""
    if not action.option_strings:
        return _value(action)
    option, value = max(action.option_strings, key=len), _value(action)
    return f"{option} {value}" if value else option


def _name(action: argparse.Action) -> str:
    """The argument as the table names it: as written, but a positional with choices by its name."""
    if not action.option_strings and action.metavar is None and action.choices is not None:
        return action.dest
    return _flag(action)


def _required(action: argparse.Action) -> bool:
    if action.option_strings:
        return bool(action.required)
    return action.nargs not in (argparse.OPTIONAL, argparse.ZERO_OR_MORE)


def synopsis(command: Command) -> str:
    """The usage line of ``command`` (wrapped at ``WIDTH``, continuation lines indented): required
    arguments bare, optional ones in brackets, a mutually exclusive group as ``[a | b]``, the
    subcommand last."""
    parser = command.parser
    grouped = _groups(parser)
    parts, seen = [], set()
    for action in _arguments(parser):
        group = grouped.get(action)
        if group is not None:
            if id(group) in seen:
                continue
            seen.add(id(group))
            inner = " | ".join(_flag(a) for a in group._group_actions if a.help != argparse.SUPPRESS)
            parts.append(f"({inner})" if group.required else f"[{inner}]")
        else:
            flag = _flag(action)
            parts.append(f"[{flag}]" if action.option_strings and not action.required else flag)
    sub = _subcommands(parser)
    if sub is not None:
        word = f"{sub.metavar or 'COMMAND'} ..."
        parts.append(word if sub.required else f"[{word}]")
    return _fill(command.name, parts)


def _fill(head: str, parts: Sequence[str]) -> str:
    """``head`` and ``parts`` on lines of at most ``WIDTH`` (a part is never split; continuation lines
    indented under the first part)."""
    indent = " " * (len(head) + 1)
    lines, line = [], head
    for part in parts:
        if len(line) + 1 + len(part) > WIDTH and line.strip():
            lines.append(line)
            line = indent + part
        else:
            line = f"{line} {part}"
    return "\n".join([*lines, line])


def _prose(text: str | None) -> str:
    """Help or description text as Markdown: whitespace collapsed, RST ``x`` as `x`."""
    if not text:
        return ""
    text = re.sub(r"\s+", " ", textwrap.dedent(text)).strip()
    return re.sub(r"``([^`]+)``", r"`\1`", text)


def _cell(text: str) -> str:
    """Text for a table cell: pipes escaped, and outside code spans ``<`` (an HTML tag's start) and
    ``*`` (emphasis)."""
    pieces = re.split(r"(`[^`]*`)", text)
    out = []
    for i, piece in enumerate(pieces):
        if i % 2 == 0:
            piece = piece.replace("<", "&lt;").replace("*", r"\*")
        out.append(piece.replace("|", r"\|"))
    return "".join(out)


def _help(action: argparse.Action, prog: str) -> str:
    """The argument's help with argparse's ``%(...)s`` expanded, as argparse would print it."""
    if not action.help:
        return ""
    params = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
    params["prog"] = prog
    if params.get("choices") is not None:
        params["choices"] = ", ".join(map(str, params["choices"]))
    return _prose(action.help % params)


def _code(value: object) -> str:
    text = str(value)
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _default(action: argparse.Action, command: str) -> str:
    """The default cell: ``required``, the default value, or empty where the argument has none. A
    default that is an absolute path is refused: it is the machine's, not the program's (a default
    such as the CPU count belongs in the help, as "default: all", with ``None`` as the value)."""
    if _required(action):
        return "required"
    if isinstance(action, argparse._VersionAction):
        return ""
    if not _takes_value(action):
        return "off" if action.default in (False, None) else "on"
    value = action.default
    if value is None or value is argparse.SUPPRESS or value == []:
        return ""
    if isinstance(value, str) and os.path.isabs(value):
        raise ValueError(
            f"{command} {_flag(action)}: the default {value!r} is an absolute path (machine-made)"
        )
    if isinstance(value, (list, tuple)):
        return " ".join(_code(v) for v in value)
    return _code(value)


def _notes(action: argparse.Action) -> list[str]:
    """What the help may not say: the value's type, the choices, a repeatable option."""
    notes = []
    if action.type in (int, float):
        notes.append("an integer" if action.type is int else "a number")
    if action.choices is not None:
        notes.append("one of " + ", ".join(_code(c) for c in action.choices))
    if isinstance(action, argparse._AppendAction) and "repeatable" not in (action.help or ""):
        notes.append("repeatable")
    return notes


def _row(action: argparse.Action, command: Command, group: Sequence[argparse.Action] | None) -> str:
    help_text = _help(action, command.name)
    extra = _notes(action)
    if group:
        others = ", ".join(_code(max(a.option_strings, key=len)) for a in group if a is not action)
        extra.append(f"not with {others}")
    if extra:
        help_text = (help_text + " " if help_text else "") + "(" + "; ".join(extra) + ")"
    return f"| {_code(_name(action))} | {_cell(help_text)} | {_default(action, command.name)} |"


def _anchor(command: Command) -> str:
    """GitHub's anchor of the command's heading (``maxk analyze claims`` -> ``maxk-analyze-claims``)."""
    return re.sub(r"[^a-z0-9 -]", "", command.name.lower()).replace(" ", "-")


def render_command(command: Command) -> str:
    """One command's section: heading, description, synopsis, its subcommands, its arguments."""
    depth = len(command.words)
    lines = [f"{'#' * min(max(depth, 2), 6)} `{command.name}`", ""]
    about = _prose(command.parser.description) or _prose(command.help)
    if about:
        lines += [_wrap(about), ""]
    lines += ["```text", synopsis(command), "```", ""]
    sub = _subcommands(command.parser)
    if sub is not None and depth > 1:  # the root's subcommands: the page's index, above
        helps = _listed(sub)
        lines += ["| subcommand | what it does |", "|---|---|"]
        for name in sub.choices:
            child = Command((*command.words, name), sub.choices[name], helps.get(name))
            lines.append(f"| [`{name}`](#{_anchor(child)}) | {_cell(_prose(helps.get(name)))} |")
        lines.append("")
    arguments = _arguments(command.parser)
    if arguments:
        groups = _groups(command.parser)
        lines += ["| argument | meaning | default |", "|---|---|---|"]
        lines += [_row(a, command, groups[a]._group_actions if a in groups else None) for a in arguments]
        lines.append("")
    return "\n".join(lines)


def _wrap(text: str) -> str:
    return textwrap.fill(text, WIDTH, break_long_words=False, break_on_hyphens=False)


def render_cli(parser: argparse.ArgumentParser) -> str:
    """``docs/cli.md``: every command of the tree under ``parser`` (Markdown, ending in a newline)."""
    tree = list(commands(parser, (parser.prog,)))
    intro = (
        "Every command of `maxk` (the console script; `python -m maxk` is the same), with every argument: "
        "what it means, its default, its choices. The workflow runs these commands for you "
        "(`workflow/rules/*.smk`); by hand they serve a single step, a probe or a check. Every command "
        "takes `-h` / `--help`; what the result files hold, column by column: `docs/outputs.md`. "
        f"Generated from the argparse parsers by `{REGENERATE}`: do not edit it by hand, "
        "`tests/test_docs.py` fails when it is out of date."
    )
    lines = ["# Command-line reference", "", _wrap(intro), ""]
    lines += ["| command | what it does |", "|---|---|"]
    for command in tree[1:]:
        lines.append(f"| [`{command.name}`](#{_anchor(command)}) | {_cell(_prose(command.help))} |")
    lines.append("")
    body = [render_command(c) for c in tree]
    return "\n".join(lines + body).rstrip("\n") + "\n"


# ------------------------------------------------------------------------------------------------
# docs/outputs.md: the columns of the result files


def placeholders() -> dict[str, str]:
    """The placeholders a documented column name may hold, as regular expressions: ``{i}`` a PPO
    iteration, ``{k}`` a subset size, ``{func}`` a reward function's name, ``{part}`` where a run's
    objective is read (``maxk.analysis.learning.PARTS``), ``{seed}`` a seed of ``replicates``."""
    from maxk.analysis.learning import PARTS

    return {
        "i": r"\d+",
        "k": r"\d+",
        "func": r"[^/]+",
        "part": "|".join(map(re.escape, PARTS)),
        "seed": r"\d+",
    }


def _pattern(name: str, holes: Mapping[str, str]) -> re.Pattern[str]:
    """``name`` as a regular expression, each ``{hole}`` replaced by its expression."""
    parts = re.split(r"\{(\w+)\}", name)
    regex = "".join(re.escape(p) if i % 2 == 0 else f"(?:{holes[p]})" for i, p in enumerate(parts))
    return re.compile(regex)


def matches(documented: str, column: str, holes: Mapping[str, str]) -> bool:
    """Whether the documented name (placeholders allowed) stands for ``column``: the same string, or a
    column its placeholders fill in (a column that is itself a pattern matches only its own string)."""
    return documented == column or (
        "{" not in column and _pattern(documented, holes).fullmatch(column) is not None
    )


def undocumented(columns: Sequence[str], documented: Sequence[str]) -> list[str]:
    """The ``columns`` that no name of ``documented`` (placeholders allowed) stands for, in order."""
    holes = placeholders()
    return [c for c in columns if not any(matches(d, c, holes) for d in documented)]


def per_problem_columns() -> tuple[str, ...]:
    """The columns of a per-problem metrics file (``maxk.analysis.per_problem.compute_metrics``), as it
    writes them for two samples of one problem (k = 1, 2)."""
    import numpy as np

    from maxk.analysis.per_problem import RewardMatrix, compute_metrics

    frame = compute_metrics(RewardMatrix(np.array(["p"], dtype=object), np.array([[0.0, 1.0]])))
    return tuple(frame.columns)


def output_columns() -> dict[str, tuple[str, ...]]:
    """Each result file's columns as the code that writes it names them, by the key of its marker in
    ``docs/outputs.md``."""
    from maxk.analysis.across_seeds import ACROSS_SEED_COLUMNS, DIFFERENCE_COLUMNS
    from maxk.analysis.bases import COLUMNS as BASES_COLUMNS
    from maxk.analysis.claims import COLUMNS as CLAIM_COLUMNS
    from maxk.analysis.contamination import COLUMNS as CONTAMINATION_COLUMNS
    from maxk.analysis.learning import LEARNING_COLUMNS
    from maxk.generate.rescore import rescore_schema
    from maxk.generate.run import SAMPLE_COLUMNS
    from maxk.provenance import CPU_KEYS, RECORD_KEYS
    from maxk.sandbox.cli import SCORE_COLUMNS
    from maxk.train import logged

    return {
        "samples": SAMPLE_COLUMNS,
        "scores": SCORE_COLUMNS,
        "metrics": per_problem_columns(),
        "rescored": tuple(rescore_schema().names),
        "train.trainer": logged.TRAINER_KEYS,
        "train.trl": logged.TRL_GRPO_KEYS,
        "train.maxk": logged.MAXK_KEYS,
        "base": logged.SFT_KEYS,
        "claims": CLAIM_COLUMNS,
        "learning": LEARNING_COLUMNS,
        "differences": DIFFERENCE_COLUMNS,
        "across_seeds": ACROSS_SEED_COLUMNS,
        "contamination": CONTAMINATION_COLUMNS,
        "bases": BASES_COLUMNS,
        "provenance": RECORD_KEYS,
        "provenance.cpu": CPU_KEYS,
    }


def documented_columns(text: str) -> dict[str, list[str]]:
    """The column names of each marked table of ``outputs.md``: the first code span of each row's first
    cell, in row order, by the marker's key. A marker without a table maps to an empty list."""
    found: dict[str, list[str]] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = MARKER.search(line)
        if not m:
            continue
        if m.group(1) in found:
            raise ValueError(f"{OUTPUTS_PAGE}: the marker 'columns: {m.group(1)}' appears twice")
        names: list[str] = []
        rows = iter(lines[i + 1 :])
        for row in rows:  # the table starts at the first line after the marker that is not blank
            if row.strip():
                break
        else:
            row = ""
        while row.startswith("|"):
            first = row.strip("|").split("|")[0]
            span = re.search(r"`([^`]+)`", first)
            if span and not set(first.strip()) <= set("-: "):
                names.append(span.group(1))
            row = next(rows, "")
        found[m.group(1)] = names
    return found


def check_outputs(text: str, columns: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """What ``outputs.md`` (``text``) gets wrong against the code's ``columns`` (``output_columns()``):
    a file without its marker, a marker the code does not know, a column written but not documented, a
    documented column nothing writes, a column documented twice. Empty: the page is right."""
    columns = output_columns() if columns is None else columns
    holes = placeholders()
    documented = documented_columns(text)
    problems = [f"no table marked <!-- columns: {key} -->" for key in columns if key not in documented]
    problems += [f"<!-- columns: {key} -->: no such file in maxk.docs.output_columns" for key in documented
                 if key not in columns]  # fmt: skip
    for key, names in documented.items():
        if key not in columns:
            continue
        written = list(columns[key])
        twice = sorted({n for n in names if names.count(n) > 1})
        problems += [f"{key}: `{n}` is documented twice" for n in twice]
        problems += [f"{key}: `{c}` is written but not documented" for c in undocumented(written, names)]
        problems += [f"{key}: `{n}` is documented but not written" for n in names
                     if not any(matches(n, c, holes) for c in written)]  # fmt: skip
    return problems


# ------------------------------------------------------------------------------------------------
# the command


def _cli_parser() -> argparse.ArgumentParser:
    from maxk.cli import build_parser

    return build_parser()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=REGENERATE,
        description="Rewrite docs/cli.md from the argparse parsers; check docs/outputs.md against the code.",
    )
    parser.add_argument("--docs", default="docs", help="the docs directory (default: docs)")
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 when docs/cli.md is out of date"
    )
    args = parser.parse_args(argv)
    docs = Path(args.docs)
    cli_page, outputs_page = docs / CLI_PAGE, docs / OUTPUTS_PAGE
    status = 0
    new = render_cli(_cli_parser())
    old = cli_page.read_text() if cli_page.is_file() else ""
    if new == old:
        print(f"{cli_page}: up to date with the parsers")
    elif args.check:
        diff = difflib.unified_diff(old.splitlines(True), new.splitlines(True), str(cli_page), "(parsers)")
        sys.stdout.writelines(diff)
        print(f"{cli_page}: out of date with the parsers (run `{REGENERATE}` to rewrite it)", file=sys.stderr)
        status = 1
    else:
        cli_page.write_text(new)
        print(f"{cli_page}: rewritten from the parsers")
    try:
        problems = check_outputs(outputs_page.read_text())
    except (OSError, ValueError) as exc:
        problems = [str(exc)]
    for problem in problems:
        print(f"{outputs_page}: {problem}", file=sys.stderr)
    if problems:
        status = 1
    else:
        print(f"{outputs_page}: every column of the code documented, and none other")
    return status


if __name__ == "__main__":
    sys.exit(main())
