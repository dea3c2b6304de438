"""``bench --baseline FILE [--fail-if-slower PCT]``: the benchmark against an earlier export
(ours or hyperfine's), shown after the summary, carried in the exports, and, with the gate, a
significant slowdown beyond PCT of any command fails the benchmark (119, ``bench_regressed``).

The baseline is read and checked before the first run, so a wrong file costs nothing
(``benchmark.against``, which the API's bench process uses too); here are the flags and the
lines shown after the summary.
"""

from __future__ import annotations

from ..benchmark import against
from ..benchmark import options as measured_options
from .parsing import Once, OncePath

attach, gate = against.attach, against.check_gate  # the comparison and the gate, the API's too


def add_flags(add) -> None:
    add(
        "--baseline",
        action=OncePath,
        metavar="FILE",
        help="compare each command with an earlier --export-json (ours or hyperfine's), by name or command",
    )
    option = measured_options.BY_FLAG["--fail-if-slower"]
    add(option.flag, action=Once, metavar=option.metavar, help=option.help)


def read(args):
    """The checked baseline export named by ``--baseline``, or None (``--fail-if-slower`` was
    read with the measured options, ``benchmark.options``)."""
    return against.read(args.baseline)


def lines(result) -> list[str]:
    from ..benchmark import baseline, gate, gate_words

    if result.baseline is None:
        return []
    found = ["", *baseline.render(result.baseline)]
    if result.gate is not None:
        decisions = [gate.Decision(**entry) for entry in result.gate["commands"]]
        found += ["", *gate_words.lines(decisions, result.gate["threshold_percent"], result.baseline.file)]
    return found
