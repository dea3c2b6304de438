"""The gate's decisions in words (``gate``): the terminal's block and the failure's line.

A regression by a figure of the command's own time says how much slower it is; one by the
off-CPU time (``gate_off_cpu``) says how much that time grew, as a share of the baseline's own
time: it is no slowdown of the whole run, and beside the baseline block's "slower by the mean"
a second "% slower" read as a second, different slowdown."""

from __future__ import annotations

from ..text import escape_unsafe, quoted
from .baseline import shown_change
from .gate import REGRESSED, Decision, judged_nothing, percent
from .gate_off_cpu import FIGURE as OFF_CPU


def said(decision: Decision, file: str) -> str:
    """A decision in words: ``'x' is 52.0 % slower than the baseline F by the fastest run's CPU
    time (...)`` (or ``by the mean ...``: ``basis``); by the off-CPU time, ``'x': its off-CPU
    time grew by 354.8 % of the baseline's own time (baseline F) by ...``."""
    name, change = quoted(decision.command), shown_change(decision.change_percent or 0.0)
    if decision.outcome != REGRESSED:
        return f"{name}: {decision.outcome}: {decision.reason}"
    if decision.figure == OFF_CPU:
        return f"{name}: its off-CPU time grew by {change} % of the baseline's own time (baseline {escape_unsafe(file)}) {decision.reason}"
    return f"{name} is {change} % slower than the baseline {escape_unsafe(file)} {decision.reason}"


def lines(decisions: list[Decision], threshold: float, file: str) -> list[str]:
    """The terminal's block, after the baseline's."""
    if not decisions:
        return []
    block = [f"Gate (slower by more than {percent(threshold)} % fails)"] + [f"  {said(d, file)}" for d in decisions]
    if judged_nothing(decisions):
        block.append(
            f"  Warning: the gate judged nothing: no command was compared with the baseline {escape_unsafe(file)}"
        )
    return block
