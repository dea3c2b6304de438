"""The export formats, in hyperfine's shapes: JSON (``BenchResult.to_json()``), CSV (its
columns, one ``parameter_<name>`` column per parameter, seconds), and three markup tables
(Markdown, AsciiDoc, org-mode: mean ± σ, min, max, and the ratio to the fastest command with its
uncertainty, in the first command's unit or ``--time-unit``; in given order, or by mean time
with ``--sort mean-time``).
With ``--baseline``, the Markdown table has a "vs baseline" column (the ratio and verdict).

Names are neutralised for where they land: a terminal's control characters never pass; a CSV
cell that a spreadsheet would read as a formula (``=``, ``+``, ``-``, ``@``, a tab or CR first,
also behind spaces or characters cleaned to spaces) is written with a leading ``'``; a markup
cell holds no newline and none of the table's own delimiters.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re

from ..text import sanitize
from . import baseline
from .result import BenchResult, CommandResult
from .printout import number, unit_for

CSV_COLUMNS = ("command", "mean", "stddev", "median", "user", "system", "min", "max")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
NUMBER = re.compile(r"[+-]?[0-9]+(\.[0-9]+)?")
HEADERS = ("Command", "Mean [{unit}]", "Min [{unit}]", "Max [{unit}]", "Relative")


def to_json(result: BenchResult) -> str:
    """Strict JSON: a figure that is no finite number (a ratio over a mean of 0) is null, as
    JSON has no Infinity or NaN and hyperfine's scripts and ``report`` read the file as JSON."""
    return json.dumps(_finite(result.to_json()), indent=2, allow_nan=False) + "\n"


def _finite(value):
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def spreadsheet_cell(text: str) -> str:
    """A CSV text cell no spreadsheet runs and no terminal obeys (OWASP's CSV injection rule);
    a plain number (a parameter's ``-5``) is left as it is. The start is judged on the raw text
    and past the spaces cleaning leaves, so a tab or a zero-width space before ``=`` hides no formula."""
    clean = sanitize(text, limit=4096)
    formula = text.startswith(FORMULA_STARTS) or clean.lstrip(" ").startswith(FORMULA_STARTS)
    return "'" + clean if formula and not NUMBER.fullmatch(clean) else clean


def csv_number(value: float) -> str:
    """A figure as hyperfine's CSV writes it (Rust's ``f64`` display): the shortest digits that
    read back as the same number, never an exponent, a whole number without ``.0`` (``0``,
    ``1``, ``0.00005``, ``inf``), where Python's ``str`` wrote ``0.0``, ``1.0`` and ``5e-05``."""
    from decimal import Decimal  # here: only an export writes one

    if math.isinf(value):  # Rust's display, where Decimal writes Infinity
        return "inf" if value > 0 else "-inf"
    text = format(Decimal(repr(value)), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def to_csv(result: BenchResult, time_unit: str | None = None, sort: str = "auto") -> str:
    names = sorted({key for r in result.results for key in r.command.parameters})
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*CSV_COLUMNS, *(f"parameter_{n}" for n in names)])
    for command_result in result.results:
        s = command_result.summary
        # hyperfine's CSV: a single run's standard deviation is 0 (its JSON's null), never an empty
        # cell; a CPU time no run measured is an empty cell (hyperfine always has one: 0 would be a figure)
        cpu = [] if s is None else ["" if v is None else csv_number(v) for v in (s.user, s.system)]
        figures: list[str] = (
            []
            if s is None
            else [
                *map(csv_number, (s.mean, s.stddev if s.stddev is not None else 0.0, s.median)),
                *cpu,
                *map(csv_number, (s.min, s.max)),
            ]
        )
        row = [spreadsheet_cell(command_result.command.name), *(figures or [""] * 7)]
        values = (spreadsheet_cell(command_result.command.parameters.get(n, "")) for n in names)
        writer.writerow([*row, *values])
    return buffer.getvalue()


def _rows(result: BenchResult, time_unit: str | None, sort: str) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """The table's header and each command's label and figures, wall time only."""
    finished = [r for r in result.results if r.summary is not None]
    unit = unit_for(finished[0].summary.mean if finished else 1.0, time_unit)  # type: ignore[union-attr]
    header = [cell.format(unit=unit[0]) for cell in HEADERS]
    fastest = _fastest(result)
    rows: list[tuple[str, list[str]]] = []
    for command_result in _ordered(result, sort):
        s, label = command_result.summary, command_result.command.label
        if s is None or fastest is None or fastest.summary is None:
            rows.append((label, ["timed out", "", "", ""]))
            continue
        base = fastest.summary
        if base.mean <= 0:  # faster than the shell's start-up: no ratio (the JSON's null, the summary's note)
            rows.append((label, [*_figures(command_result, unit), "—"]))
            continue
        ratio = s.mean / base.mean
        relative = f"{ratio:.2f}"
        if command_result is not fastest and s.stddev is not None and base.stddev is not None and s.mean > 0:
            spread = ratio * ((s.stddev / s.mean) ** 2 + (base.stddev / base.mean) ** 2) ** 0.5
            relative += f" ± {spread:.2f}"
        rows.append((label, [*_figures(command_result, unit), relative]))
    return header, rows


def _figures(command_result: CommandResult, unit: tuple[str, float]) -> list[str]:
    s = command_result.summary
    assert s is not None
    spread = f" ± {number(s.stddev, unit)}" if s.stddev is not None else ""
    return [f"{number(s.mean, unit)}{spread}", number(s.min, unit), number(s.max, unit)]


def _fastest(result: BenchResult) -> CommandResult | None:
    """What the Relative column divides by, as hyperfine's tables do (``markup.rs``: its
    ``relative_speed::compute``): the command with the lowest mean wall time, whatever
    ``--reference`` (the summary's comparison) or ``--metric`` (the tables show wall time), so
    every cell is 1.00 or more."""
    finished = [r for r in result.results if r.summary is not None]
    return min(finished, key=lambda r: r.summary.mean) if finished else None  # type: ignore[union-attr]


def _cell(text: str, delimiters: str) -> str:
    text = sanitize(text, limit=4096)
    for delimiter in delimiters:
        text = text.replace(delimiter, "\\" + delimiter)
    return text


def _code_span(text: str) -> str:
    """A Markdown code span holding ``text`` as it is: a fence longer than any run of backticks
    in it (CommonMark), so the table names the command that ran, backticks included."""
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    pad = " " if text[:1] == "`" or text[-1:] == "`" or (text[:1] == " " and text[-1:] == " ") else ""
    fence = "`" * (longest + 1)
    return f"{fence}{pad}{text}{pad}{fence}"


def to_markdown(result: BenchResult, time_unit: str | None = None, sort: str = "auto") -> str:
    header, rows = _rows(result, time_unit, sort)
    extra, alignment = baseline.markdown_header(result.baseline)  # a column of its own with --baseline
    lines = ["| " + " | ".join(header) + " |" + extra, "|:---|---:|---:|---:|---:|" + alignment]
    names = [r.command.name for r in _ordered(result, sort)]
    for (label, cells), command in zip(rows, names):
        name = _code_span(_cell(label, "|"))
        lines.append("| " + " | ".join([name, *cells]) + " |" + baseline.markdown_cell(result.baseline, command))
    return "\n".join(lines) + "\n"


def to_asciidoc(result: BenchResult, time_unit: str | None = None, sort: str = "auto") -> str:
    header, rows = _rows(result, time_unit, sort)
    parts = ['[cols="<,>,>,>,>"]\n|===', "\n| " + " \n| ".join(header) + " \n"]
    for label, cells in rows:
        name = "`" + _cell(label, "|").replace("`", "{backtick}") + "`"  # AsciiDoc's own attribute
        parts.append("\n| " + " \n| ".join([name, *cells]) + " \n")
    parts.append("|===\n")
    return "".join(parts)


# An inner = that org would read as the verbatim's end (org-emphasis-regexp-components: non-space
# before it, its closing set after it) gets a zero-width space; any other = is written as it ran.
ORG_EARLY_CLOSE = re.compile(r"(?<=\S)=(?=[-\s.,:!?;'\")}\\\[])")


def to_orgmode(result: BenchResult, time_unit: str | None = None, sort: str = "auto") -> str:
    header, rows = _rows(result, time_unit, sort)

    def line(cells: list[str]) -> str:
        return f"| {cells[0]}  |  " + " |  ".join(cells[1:]) + " |\n"

    parts = [line(header), "|" + "--+" * (len(header) - 1) + "--|\n"]
    for label, cells in rows:
        parts.append(line([_org_name(label), *cells]))
    return "".join(parts)


def _org_name(label: str) -> str:
    """A command's name as org shows it: verbatim (``=...=``), with a zero-width space only where
    an inner ``=`` would end it. A ``|`` cannot stand in a table's cell, and org's ``\\vert{}`` is
    shown as it is inside a verbatim: so the verbatim ends before each one, and begins again
    after it where org lets one begin (after a space; text glued to the bar is left plain). Org
    begins and ends a verbatim only at text that is no space: the spaces at a piece's ends go
    outside it."""
    parts = []
    for at, piece in enumerate(_cell(label, "").split("|")):
        if at:
            parts.append("\\vert{}")
        core = piece.strip()
        if not core:
            parts.append(piece)
            continue
        lead, trail = piece[: piece.index(core)], piece[piece.index(core) + len(core) :]
        if not (at and not lead):  # glued to the bar before it: org would begin no verbatim there
            core = "=" + ORG_EARLY_CLOSE.sub("=\u200b", core) + "="
        parts.append(lead + core + trail)
    return "".join(parts)


def _ordered(result: BenchResult, sort: str) -> list[CommandResult]:
    ordered = list(result.results)
    if sort == "mean-time":
        ordered.sort(key=lambda r: r.summary.mean if r.summary is not None else float("inf"))
    return ordered


WRITERS = {
    "json": lambda result, time_unit=None, sort="auto": to_json(result),
    "csv": to_csv,
    "markdown": to_markdown,
    "asciidoc": to_asciidoc,
    "orgmode": to_orgmode,
}
