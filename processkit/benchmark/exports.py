"""``--export-json``, ``--export-markdown``, ``--export-csv``: hyperfine's three export shapes.

JSON is ``BenchResult.to_json()``; Markdown is hyperfine's table (mean ± σ, min, max, relative);
CSV has hyperfine's columns and one ``parameter_<name>`` column per parameter.
"""

from __future__ import annotations

import csv
import io
import json

from . import baseline
from .result import BenchResult
from .summary import unit_for

CSV_COLUMNS = ("command", "mean", "stddev", "median", "user", "system", "min", "max")


def to_json(result: BenchResult) -> str:
    return json.dumps(result.to_json(), indent=2) + "\n"


def to_markdown(result: BenchResult) -> str:
    summaries = [r.summary for r in result.results if r.summary is not None]
    if not summaries:
        return "No command finished a run.\n"
    name, scale = unit_for(min(s.mean for s in summaries))
    fastest = min(s.mean for s in summaries)
    header, alignment = baseline.markdown_header(result.baseline)  # a column of its own with --baseline
    lines = [
        f"| Command | Mean [{name}] | Min [{name}] | Max [{name}] | Relative |{header}",
        f"|:---|---:|---:|---:|---:|{alignment}",
    ]
    for command_result in result.results:
        s = command_result.summary
        label = "`" + command_result.command.name.replace("|", "\\|").replace("`", "'") + "`"
        if s is None:
            lines.append(
                f"| {label} | timed out | | | |{baseline.markdown_cell(result.baseline, command_result.command.name)}"
            )
            continue
        spread = f" ± {s.stddev * scale:.1f}" if s.stddev is not None else ""
        relative = s.mean / fastest
        lines.append(
            f"| {label} | {s.mean * scale:.1f}{spread} | {s.min * scale:.1f} | {s.max * scale:.1f} | {relative:.2f} |"
            + baseline.markdown_cell(result.baseline, command_result.command.name)
        )
    return "\n".join(lines) + "\n"


def to_csv(result: BenchResult) -> str:
    names = sorted({key for r in result.results for key in r.command.parameters})
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*CSV_COLUMNS, *(f"parameter_{n}" for n in names)])
    for command_result in result.results:
        s = command_result.summary
        figures = [] if s is None else [s.mean, s.stddev if s.stddev is not None else "", s.median, s.user, s.system]
        figures = figures + ([s.min, s.max] if s is not None else [])
        row = [command_result.command.name, *(figures or [""] * 7)]
        writer.writerow([*row, *(command_result.command.parameters.get(n, "") for n in names)])
    return buffer.getvalue()


WRITERS = {"json": to_json, "markdown": to_markdown, "csv": to_csv}
