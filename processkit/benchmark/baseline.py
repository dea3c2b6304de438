"""A benchmark against an earlier export of the same commands (``bench --baseline``, ``report
OLD.json NEW.json``): per command the ratio of the means with its uncertainty, a Mann-Whitney U
test, and a verdict a CI job can gate on (``--fail-if-slower``).

As criterion and pytest-benchmark's ``--benchmark-compare-fail`` do, a change counts only when
it is both significant (p below ``stats.SIGNIFICANCE``) and, for the gate, beyond the given
percentage: noise never fails a build, and neither does a real but negligible slowdown. Commands
are matched by name first, then by the command's text, each baseline command used once.
"""

from __future__ import annotations

import math

from ..plain import Plain
from ..text import escape_unsafe, quoted
from .json_values import is_number, kind, magnitude
from .stats import SIGNIFICANCE, TOO_FEW, Summary, mann_whitney, ratio

SLOWER = "slower"
FASTER = "faster"
UNCHANGED = "no significant change"
UNMATCHED = "not in the baseline"
# By CPU time, a command paired with its baseline command whose runs' CPU time was not measured
# (null: ``accounting.ChildrenUsage``) on one side or both: no ratio, and the side named.
NOT_MEASURED = {
    (True, False): "CPU time not measured in these runs",
    (False, True): "CPU time not measured in the baseline",
    (True, True): "CPU time not measured on either side",
}
VERDICTS = (SLOWER, FASTER, UNCHANGED, TOO_FEW, UNMATCHED, *NOT_MEASURED.values())

# (name, text, Summary or None: not measured by the metric, times, (timed-out runs, runs)): a
# live result's or an export's
Sample = tuple


class Against(Plain):
    """One command against its baseline; ``ratio`` is mean / baseline mean (above 1: slower)."""

    command: str
    baseline_command: str | None
    mean: float | None
    baseline_mean: float | None
    ratio: float | None
    ratio_stddev: float | None
    p_value: float | None
    verdict: str
    # [timed out, runs, the baseline's timed out, its runs] where a larger share of this side's
    # runs timed out: they are in no figure above, so the verdict alone would hide them
    timed_out: list | None = None

    @property
    def change_percent(self) -> float | None:
        return None if self.ratio is None else (self.ratio - 1) * 100


class BaselineReport(Plain):
    """Every command of a benchmark against the baseline file ``file``, by ``metric``."""

    file: str
    metric: str
    commands: list

    def regressions(self, percent: float) -> list[Against]:
        """The commands significantly slower than the baseline by more than ``percent``, by the
        comparison's metric: its word, not the gate's (``gate``: load-aware, and timeouts count)."""
        return [
            entry
            for entry in self.commands
            if entry.verdict == SLOWER and entry.change_percent is not None and entry.change_percent > percent
        ]

    def to_json(self) -> dict:
        return {
            "file": self.file,
            "metric": self.metric,
            "test": "mann-whitney-u",
            # timed_out only where there is something to say: an added field, absent otherwise
            "commands": [{k: v for k, v in e._asdict().items() if k != "timed_out" or v} for e in self.commands],
        }

    @classmethod
    def from_json(cls, data: dict) -> BaselineReport:
        """Back from ``to_json`` (a shape ``recorded`` has checked, or our own export's)."""
        fields = Against._fields
        return cls(
            data["file"],
            data["metric"],
            [Against(**{key: entry.get(key) for key in fields}) for entry in data["commands"]],
        )


def match(current: list[Sample], baseline: list[Sample], joined: bool = False) -> list[int | None]:
    """For each current command the index of its baseline command: same name, else same text;
    else, where the baseline is our export before processkit-bench/3 (``joined``), which named an
    argv command by its words joined by spaces (``sh -c echo a  b``), that text."""
    found: list[int | None] = [None] * len(current)
    used: set[int] = set()
    passes = [([s[0] for s in current], [s[0] for s in baseline]), ([s[1] for s in current], [s[1] for s in baseline])]
    if joined:
        passes.append(([_words_joined(s[1]) for s in current], passes[1][1]))
    for keys, old_keys in passes:  # by name, then by command text
        for index, key in enumerate(keys):
            if found[index] is not None or key is None:
                continue
            hit = next((k for k, old in enumerate(old_keys) if k not in used and old == key), None)
            if hit is not None:
                found[index] = hit
                used.add(hit)
    return found


def _words_joined(text: str) -> str | None:
    """``text``'s words (as a shell reads them) joined by spaces: an argv command's text before
    processkit-bench/3. None where it does not read as words (an unclosed quote)."""
    import shlex  # an older baseline's argv commands only

    try:
        return " ".join(shlex.split(text))
    except ValueError:
        return None


def against(
    current: list[Sample], baseline: list[Sample], file: str, metric: str, joined: bool = False
) -> BaselineReport:
    """Every command with runs against its baseline command, paired over every command with
    runs on both sides (as the gate pairs them): one whose runs were not measured by ``metric``
    (CPU time, null) is still paired, its verdict saying which side lacks it."""
    entries = []
    for sample, hit in zip(current, match(current, baseline, joined)):
        name, _, summary, times, ended = sample
        mean = None if summary is None else summary.mean
        if hit is None:
            entries.append(Against(name, None, mean, None, None, None, None, UNMATCHED))
            continue
        old_name, _, old_summary, old_times, old_ended = baseline[hit]
        if summary is None or old_summary is None:
            verdict = NOT_MEASURED[summary is None, old_summary is None]
            old_mean = None if old_summary is None else old_summary.mean
            entry = Against(name, old_name, mean, old_mean, None, None, None, verdict)
        else:
            entry = _entry(name, summary, times, old_name, old_summary, old_times)
        if more_timed_out(*ended, *old_ended):
            entry.timed_out = [*ended, *old_ended]
        entries.append(entry)
    return BaselineReport(file, metric, entries)


def ended(timed_out: int | None, times: list, timeout_ms: int | None) -> tuple[int, int]:
    """A recorded command's (timed-out runs, runs): its file's count (hyperfine's has none) and,
    against this benchmark's ``timeout_ms``, each finished run that took as long, which it would
    have ended: a baseline measured without that timeout is no share of 0 to be worse than."""
    out = (timed_out or 0) + (sum(time * 1000 >= timeout_ms for time in times) if timeout_ms else 0)
    return out, len(times) + (timed_out or 0)


def more_timed_out(out: int, runs: int, old_out: int, old_runs: int) -> bool:
    """Whether a larger share of ``runs`` timed out than of the baseline's (exact, in integers)."""
    return out > 0 and runs > 0 and out * max(old_runs, 1) > old_out * runs


def timed_out_words(entry: Against) -> str:
    """``; 3 of 12 runs timed out, in none of these figures (the baseline's 0 of 12)``, or ''."""
    if not entry.timed_out:
        return ""
    out, runs, old_out, old_runs = entry.timed_out
    return f"; {out} of {runs} runs timed out, in none of these figures (the baseline's {old_out} of {old_runs})"


def _entry(name: str, new: Summary, times: list, old_name: str, old: Summary, old_times: list) -> Against:
    value, spread = ratio(new, old)
    p_value = mann_whitney(times, old_times)
    if p_value is None:
        verdict = TOO_FEW
    elif p_value >= SIGNIFICANCE or value == 1:
        verdict = UNCHANGED
    else:
        verdict = SLOWER if value > 1 else FASTER
    finite = value if math.isfinite(value) else None  # JSON has no infinity: a zero baseline gives no ratio
    spread = spread if finite is not None and spread is not None and math.isfinite(spread) else None
    return Against(name, old_name, new.mean, old.mean, finite, spread, p_value, verdict)


def describe(entry: Against) -> str:
    """``1.21 ± 0.03 × the baseline (21.0 % slower by the mean, Mann-Whitney U p = 1.2e-05)``: the
    ratio of the means, as hyperfine compares, its basis said as the gate says its own."""
    if entry.verdict == UNMATCHED:
        return UNMATCHED
    if entry.verdict in NOT_MEASURED.values():
        return f"{entry.verdict} (not accounted for), against {quoted(entry.baseline_command or '')}: no ratio{timed_out_words(entry)}"
    if entry.ratio is None:
        return f"the baseline's mean is 0: no ratio ({entry.verdict}){timed_out_words(entry)}"
    spread = f" ± {entry.ratio_stddev:.2f}" if entry.ratio_stddev is not None else ""
    verdict = entry.verdict
    if verdict in (SLOWER, FASTER):
        verdict = f"{shown_change(entry.change_percent or 0.0)} % {verdict} by the mean"
    test = "" if entry.p_value is None else f", Mann-Whitney U p = {entry.p_value:.2g}"
    return f"{entry.ratio:.2f}{spread} × the baseline ({verdict}{test}){timed_out_words(entry)}"


def shown_change(change: float, digits: int = 1) -> str:
    """A change's size as the baseline's block and the gate write it, to ``digits`` places; one
    that is not nothing but rounds to it is ``<0.1`` (``<1``), never ``0.0``: a regression beyond
    ``--fail-if-slower 0`` is no "0.0 % slower"."""
    size = abs(change)
    shown = f"{size:.{digits}f}"  # as formatted: 0.5 to no places rounds to even, 0
    return f"<{10.0**-digits:g}" if size and float(shown) == 0 else shown


def render(report: BaselineReport) -> list[str]:
    """The terminal's block, after the summary."""
    by = " by CPU time" if report.metric == "cpu" else ""
    lines = [f"Against the baseline {escape_unsafe(report.file)}{by}"]
    lines += [f"  {quoted(entry.command)}: {describe(entry)}" for entry in report.commands]
    return lines


def markdown_header(report: BaselineReport | None) -> tuple[str, str]:
    """The Markdown table's extra column (header, alignment), empty without a baseline."""
    return ("", "") if report is None else (" vs baseline |", "---:|")


def markdown_cell(report: BaselineReport | None, name: str) -> str:
    if report is None:
        return ""
    entry = next((e for e in report.commands if e.command == name), None)
    if entry is None or entry.verdict == UNMATCHED:
        return " — |"
    if entry.ratio is None:
        return f" {entry.verdict}{timed_out_words(entry)} |"
    spread = f" ± {entry.ratio_stddev:.2f}" if entry.ratio_stddev is not None else ""
    return f" {entry.ratio:.2f}{spread} ({entry.verdict}{timed_out_words(entry)}) |"


def read_back(read, value) -> BaselineReport | None:
    """Our export's ``baseline`` field, checked as the shape ``BaselineReport.to_json`` writes;
    ``read``: the export's checker (``recorded._Reader``), its failures naming the file."""
    if value is None:
        return None
    found = read.mapping(value, "'baseline'")
    read.string(found.get("file"), "'baseline.file'")
    if found.get("metric") not in ("wall", "cpu"):
        raise read.fail("'baseline.metric'", "is neither 'wall' nor 'cpu'")
    for index, entry in enumerate(read.sequence(found.get("commands"), "'baseline.commands'")):
        where = f"baseline.commands[{index}]"
        read.mapping(entry, where)
        read.string(entry.get("command"), f"{where}.command")
        if entry.get("verdict") not in VERDICTS:
            raise read.fail(f"{where}.verdict", "is not a verdict this program writes")
        if entry.get("baseline_command") is not None:
            read.string(entry["baseline_command"], f"{where}.baseline_command")
        for key in ("mean", "baseline_mean"):
            read.maybe_seconds(entry.get(key), f"{where}.{key}")
        out = None if entry.get("timed_out") is None else read.count_list(entry["timed_out"], f"{where}.timed_out")
        # As written: none more timed out than ran, a larger share than the baseline's.
        if out is not None and (len(out) != 4 or out[0] > out[1] or out[2] > out[3] or not more_timed_out(*out)):
            raise read.fail(f"{where}.timed_out", "is not four counts: timed out, of runs, and the baseline's")
        for key, high in (("ratio", 1e300), ("ratio_stddev", 1e300), ("p_value", 1.0)):
            value = entry.get(key)
            if value is not None and not (is_number(value) and 0 <= value <= high):
                said = magnitude(value) if is_number(value) else kind(value)
                raise read.fail(f"{where}.{key}", f"is {said}, not a number from 0 to {high:g}")
    return BaselineReport.from_json(found)
