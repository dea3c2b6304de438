"""``--fail-if-slower PCT``: whether a command got slower than its ``--baseline``, decided on a
figure the machine's load does not move, or said to be inconclusive when none is at hand.

A CI runner is busy: other jobs share its CPUs, each in a group of its own, and a CPU-bound
command's wall time doubles beside them while the work it does is the same. A gate on wall time
then fails an unchanged command. So each command is judged on the best figure both sides hold:

1. ``instructions`` (a hardware counter, per run: ``counters.py``) where both have them: the
   work done, whatever the load.
2. Else, when either side was measured on a busy host (other processes took ``BUSY_SHARE`` of
   the time of the CPUs the runs may use or more, ``host_load.py``, or a CPU quota on the runs'
   groups held them back as long, ``throttle.py``: their wall time stretched, the host looking
   idle), CPU time (user+system of the whole tree, per run):
   load barely moves it for a CPU-bound command, but contention for caches and cores adds to
   each run's (measured beside four CPU-bound neighbours on two cores: the mean up to 17 %,
   the fastest run up to 5 %). So the change is the fastest runs' (the ones the load disturbed
   least: minimum against minimum), and it counts only beyond ``CONTENTION_ALLOWANCE`` as well
   as PCT, and by more than ``CPU_FLOOR_SECONDS`` (a short command's CPU time moves by that
   much beside busy neighbours); one within either is inconclusive. A baseline without CPU time per run (hyperfine's) leaves only wall time,
   which a busy host makes inconclusive unless ``_waited`` (below) finds a longer wait.
3. Else (both quiet) the benchmark's ``--metric`` (wall time by default): what the user asked.
   On a busy host with nothing better, a wall-time slowdown within what the others' load can
   explain (``gate_load.load_explains``) is inconclusive; one beyond it still fails.

Instructions and CPU time count only the time a command runs, never the time it waits (a
sleep, I/O, a lock, the network): a command that now waits ten times as long reads the same on
both. So where either decided, or wall time was within what a busy host's load can explain
(``_waited`` needs only this side's CPU time), wall time is still looked at: a significant
wall-time slowdown of the fastest runs beyond what the load could add to the command's own CPU
time (its CPU part stretched up to ``1 / (1 - share)``, its waits not at all) and beyond the
threshold (at least ``CONTENTION_ALLOWANCE``) fails by wall time, whatever the other figure
said. Within that stretch but beyond the threshold it passes only where CPU time is most of the
command's wall time, or of the part of it a CPU quota let it have a CPU (``CPU_BOUND``): for one that mostly waits, the stretch (up to 19 times its
CPU time) covers a longer wait as well, so it is inconclusive. Not under ``--metric cpu``.

A slowdown counts only when it is also significant (Mann-Whitney U, ``baseline._entry``), as
criterion and pytest-benchmark gate. "Inconclusive" never fails the build: it says why. A
quota's holding, busy or not, is said beside every verdict (``gate_load.throttled``), the baseline's too:
a baseline recorded throttled has slow wall times that would pass a later regression.

Where both sides' runs were given one CPU and read their wait for it, a command whose off-CPU time
grew beyond the threshold (``gate_off_cpu``) regressed, whatever others' CPU load and the figures above.

Runs ended by ``--timeout`` are left out of every figure above, so a command that now hangs
once in a while reads as fast as ever by its finished runs. ``_hung`` judges them beside the
figures: a larger share of timed-out runs than the baseline's (its finished runs as long as the
timeout counted as timed out: a baseline measured without it would have had them end) is a
slowdown of at least the timeout over the baseline's median. A regression by either fails; the
timeouts' "inconclusive" never hides a regression by a figure the load does not move.
"""

from __future__ import annotations

from ..plain import Plain
from ..text import quoted
from . import gate_off_cpu
from .baseline import SLOWER, _entry, ended, match, more_timed_out, shown_change
from .gate_load import held, load_explains, load_said, throttled
from .host_load import BUSY_SHARE, Load
from .stats import SIGNIFICANCE, TOO_FEW, best_p, summarize

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable


CONTENTION_ALLOWANCE = 15.0  # % of CPU time that sharing caches and cores with busy neighbours can add
# Seconds of CPU time the fastest run of a short command moves by between two busy benchmarks of
# it, unchanged: `sleep 0.02`'s (about 1 ms) read 0.91 to 1.09 ms over twelve 5-run benchmarks
# beside the load of a shared 2-core machine, and 46 % more (0.5 ms) once; a change under this is
# never a regression by CPU time, whatever its percentage.
CPU_FLOOR_SECONDS = 0.001
# CPU time vouches for a wall-time slowdown that the load can explain only where it is most of
# the command's wall time: a command that mostly waits (sleep, I/O, the network) is slowed by a
# longer wait as well as by the load, and its CPU time tells the two apart no better than its
# wall time (``_waited``): inconclusive, never passed.
CPU_BOUND = 0.5
WHY = {"instructions": "instructions retired", "cpu": "CPU time", "wall": "wall time"}
# Why a figure load does not move is one to rest on, said in the bracket after its change, before
# the test (``_tested``): one bracket, not two back to back.
HOW = {
    "instructions": "a hardware counter: load does not move it",
    "cpu": "user+system of the whole tree, which load barely moves for a CPU-bound command",
}
REGRESSED, PASSED, INCONCLUSIVE = "regressed", "passed", "inconclusive"
NOT_JUDGED = ", so it was not judged"  # how a decision that compared nothing ends (``judged_nothing``)
LACKED = "not in the baseline (no command there has its name or its text)"


class Decision(Plain):
    """The gate's word on one command: the figure it used, the change, and why."""

    command: str
    figure: str  # instructions, cpu, wall or off_cpu (``gate_off_cpu``)
    outcome: str  # regressed, passed or inconclusive
    change_percent: float | None
    p_value: float | None
    reason: str


def _figure_of(source, figure: str) -> list | None:
    """A command's per-run values of ``figure`` (a live result or a recorded one), or None."""
    if figure == "wall":
        return source.times or None
    if figure == "cpu":
        return source.cpu_times or None
    values = source.instructions
    return values if values and all(value is not None for value in values) else None


def decide(
    result, earlier, threshold: float, flag: str, more_runs: Callable[[int], str], one_cpu: str = "--cpus N"
) -> list[Decision]:
    """Each of ``result``'s commands (a BenchResult) against ``earlier`` (a RecordedBench) at
    ``threshold`` %; ``flag``: how the gate's option is named in a message, ``more_runs`` what to
    give for a run count or more (``against.more_runs``: ``--runs 5``, ``min_runs=5``), ``one_cpu``
    how a single CPU is given (``--cpus N``, ``cpus=N``)."""
    now, then = Load.of(result.settings.get("host_load")), earlier.load
    busy = any(side is not None and side.held() >= BUSY_SHARE for side in (now, then))
    current = [r for r in result.results if r.summary is not None]
    old = list(earlier.commands)  # matched before its runs are looked at: one with none is there
    found = match([(r.command.name, r.command.text) for r in current], [(c.name, c.text) for c in old], earlier.joined)
    decisions = []
    timeout_ms = result.settings.get("timeout_ms")
    metric = earlier.metric_for(result.metric)
    untold = (gate_off_cpu.untold(now, then, one_cpu) if busy else None) or ""  # the same words for each
    for new, hit in zip(current, found):
        if hit is None:  # said, never passed over: a renamed command would leave the gate judging nothing
            decisions.append(_unjudged(new.command.name, metric, LACKED))
            continue
        if old[hit].summary is None:
            why = f"the baseline's {quoted(old[hit].name)} has no finished run"
            decisions.append(_unjudged(new.command.name, metric, why))
            continue
        hung = _hung(new, old[hit], timeout_ms, threshold, flag, busy, now, then)
        off = _off_cpu(new, old[hit], threshold, flag, busy, now, then)
        decided = _decide(new, old[hit], threshold, flag, busy, now, then, metric, more_runs)
        # a regression any way fails; else the timeouts' word (inconclusive) before the figures'
        regressed = [d for d in (hung, off, decided) if d is not None and d.outcome == REGRESSED]
        decision = (regressed or [hung or decided])[0]
        if not regressed:
            decision.reason += untold
        decisions.append(decision)
    return decisions


def _unjudged(name: str, metric: str, why: str) -> Decision:
    reason = f"{why}{NOT_JUDGED}"
    return Decision(command=name, figure=metric, outcome=INCONCLUSIVE, change_percent=None, p_value=None, reason=reason)


def judged_nothing(decisions: list[Decision]) -> bool:
    """No command was compared with the baseline (a wrong file, every command renamed): the exit
    is 0 as for a gate passed, so the block says it."""
    return bool(decisions) and all(d.reason.endswith(NOT_JUDGED) for d in decisions)


def _decide(
    new, old, threshold: float, flag: str, busy: bool, now, then, metric: str, more_runs: Callable[[int], str]
) -> Decision:
    name = new.command.name
    if _figure_of(new, "instructions") and _figure_of(old, "instructions"):
        figure, limit = "instructions", threshold
    elif metric == "cpu" and not (_figure_of(new, "cpu") and _figure_of(old, "cpu")):
        # CPU time asked for, and the baseline records it per run: never judged by wall time instead
        side = "this side" if not _figure_of(new, "cpu") else "the baseline"
        reason = f"by {WHY['cpu']} ({HOW['cpu']}): not measured in every run of {side} (not accounted for), nothing to compare"
        return Decision(name, "cpu", INCONCLUSIVE, None, None, reason)
    elif busy and _figure_of(new, "cpu") and _figure_of(old, "cpu"):
        figure, limit = "cpu", max(threshold, CONTENTION_ALLOWANCE)
    else:
        figure, limit = ("wall", threshold) if busy else (metric, threshold)
    values, old_values = _figure_of(new, figure) or [], _figure_of(old, figure) or []
    entry = _entry(name, summarize(values, [], [], []), values, old.name, summarize(old_values, [], [], []), old_values)
    change, p_value = entry.change_percent, entry.p_value
    fastest = figure == "cpu" and busy and bool(values) and bool(old_values) and min(old_values) > 0
    if fastest:
        change = (min(values) / min(old_values) - 1) * 100  # the runs the load disturbed least
    by = _basis(figure, fastest)
    slower = entry.verdict == SLOWER and change is not None and change > threshold
    shown = f"{shown_change(change)} %" if change is not None else "no ratio"
    test = _tested(figure, p_value)
    if slower and figure == "wall" and busy and change is not None and change <= load_explains(now, then):
        # a baseline without CPU time per run (hyperfine's) still has its wall time: this side's
        # CPU time is all ``_waited`` needs to tell a longer wait from the load
        waited = _waited(new, old, threshold, flag, busy, now, then)
        if waited is not None:
            return waited
        unmeasured = (
            ""
            if _figure_of(new, "cpu")
            else "; these runs' CPU time was not measured, so a longer wait could not be told from the load"
        )
        reason = (
            f"{load_said(now, then)}: {shown} slower {by} ({test}) "
            f"is within what that load can explain ({load_explains(now, then):.0f} %), and no figure load does not "
            f"move is on both sides (a baseline with CPU time per run, ours, has one){unmeasured}"
        )
        return Decision(name, figure, INCONCLUSIVE, change, p_value, reason)
    if slower and figure == "cpu" and busy and min(values) - min(old_values) <= CPU_FLOOR_SECONDS:
        grown = (min(values) - min(old_values)) * 1e3
        reason = (
            f"{load_said(now, then)}; {shown} slower {by} ({test}), "
            f"but by {grown:.2g} ms, within the {CPU_FLOOR_SECONDS * 1e3:g} ms a short command's CPU time moves by "
            "beside busy neighbours"
        )
        waited = _waited(new, old, threshold, flag, busy, now, then) if metric != "cpu" else None
        return waited or Decision(name, figure, INCONCLUSIVE, change, p_value, reason)
    if slower and change is not None and change > limit:
        context = f" while {load_said(now, then)}" if busy or throttled(now, then) else ""
        reason = f"{by} ({test}){context}, beyond {flag} %"  # the figure's bracket beside it
        return Decision(name, figure, REGRESSED, change, p_value, reason)
    waited = _waited(new, old, threshold, flag, busy, now, then) if figure != "wall" and metric != "cpu" else None
    if waited is not None:
        return waited
    if slower:
        reason = (
            f"{load_said(now, then)}; {shown} slower {by} "
            f"({test}), beyond {flag} % but within the {CONTENTION_ALLOWANCE:g} % that contention can add"
        )
        return Decision(name, figure, INCONCLUSIVE, change, p_value, reason)
    context = f"; {load_said(now, then)}" if busy or throttled(now, then) else ""
    if change is not None and change > threshold and (best_p(len(values), len(old_values)) or 1.0) >= SIGNIFICANCE:
        more = next((n for n in range(2, 1000) if (best_p(n, len(old_values)) or 1.0) < SIGNIFICANCE), None)
        reason = (
            f"{shown} slower {by}, beyond {flag} % ({test}), but {len(values)} run{'s' * (len(values) != 1)} against the baseline's "
            f"{len(old_values)} {'are' if len(values) != 1 else 'is'} too few to show it significant, their times untied: "
            + (f"give {more_runs(more)} or more" if more else "the baseline needs more runs")
        )
        return Decision(name, figure, INCONCLUSIVE, change, p_value, reason + context)
    if change is None:
        return Decision(name, figure, PASSED, change, p_value, f"{entry.verdict} {by} ({test}){context}")
    return Decision(
        name, figure, PASSED, change, p_value, f"{_way(entry, figure, change, by, threshold, flag)} ({test}){context}"
    )


def _off_cpu(new, old, threshold: float, flag: str, busy: bool, now, then) -> Decision | None:
    """A longer wait by the off-CPU time (``gate_off_cpu``), whatever others' CPU load: a regression, or None."""
    found = gate_off_cpu.grown(new, old, now, then, threshold, flag)
    if found is None:
        return None
    change, p_value, reason = found
    context = f" while {load_said(now, then)}" if busy or throttled(now, then) else ""
    return Decision(new.command.name, gate_off_cpu.FIGURE, REGRESSED, change, p_value, reason + context)


def _hung(new, old, timeout_ms: int | None, threshold: float, flag: str, busy: bool, now, then) -> Decision | None:
    """The runs ``--timeout`` ended, which no figure holds: each took at least the timeout. A
    larger share of them than the baseline's is at least the timeout's excess over the
    baseline's median, with no sample test (a hang is no draw from the finished runs' spread);
    beyond the threshold it fails, unless a busy machine's load can explain even that."""
    if not new.timed_out or not timeout_ms or old.summary.median <= 0:
        return None
    old_out, old_runs = ended(old.timed_out, old.times, timeout_ms)  # its runs as long: timed out here
    if not more_timed_out(new.timed_out, len(new.runs), old_out, old_runs):
        return None
    change = (timeout_ms / 1000 / old.summary.median - 1) * 100
    if change <= threshold:
        return None  # a timeout this close to the baseline's runs says no more than they do
    words = (
        f"{new.timed_out} of {len(new.runs)} runs reached the timeout ({timeout_ms / 1000:g} s), "
        f"the baseline's {old_out} of {old_runs}: each took at least {shown_change(change, 0)} % longer than the "
        f"baseline's median ({old.summary.median * 1e3:.3g} ms), and none is in the figures"
    )
    if busy and change <= load_explains(now, then):
        reason = f"{load_said(now, then)}; {words}, within what that load can explain"
        return Decision(new.command.name, "wall", INCONCLUSIVE, change, None, reason)
    reason = f"by the timed-out runs' wall time at least: {words}; beyond {flag} %"
    return Decision(new.command.name, "wall", REGRESSED, change, None, reason)


def _waited(new, old, threshold: float, flag: str, busy: bool, now, then) -> Decision | None:
    """A regression by wall time that the figure load does not move cannot see: the command
    waits longer (sleep, I/O, a lock). Its fastest run is compared with the baseline's fastest
    plus what the load could add to its CPU time (the median of this side's runs, stretched up
    to ``1 / (1 - share)``; a command's waits are not stretched); beyond that by more than the
    threshold (at least ``CONTENTION_ALLOWANCE``) and significantly slower, it regressed. Within
    that but beyond the threshold, the load explains it only for a CPU-bound command
    (``CPU_BOUND``); one that mostly waits is inconclusive, as a longer wait explains it too."""
    times, old_times, cpu = new.times or [], old.times or [], sorted(new.cpu_times or [])
    if not times or not old_times or not cpu or min(old_times) <= 0:
        return None
    entry = _entry(
        new.command.name, summarize(times, [], [], []), times, old.name, summarize(old_times, [], [], []), old_times
    )
    if entry.verdict != SLOWER:
        return None
    # the measured share whenever it is known, busy or not: a share just under BUSY_SHARE still
    # stretches a CPU-bound command's wall time by a third
    share = held(now, then)
    stretch = cpu[len(cpu) // 2] * share / (1 - share)  # what the others' load could add to its CPU time
    limit = max(threshold, CONTENTION_ALLOWANCE)
    explained = (min(old_times) + stretch) * (1 + limit / 100)
    change = (min(times) / min(old_times) - 1) * 100
    bound = _bound((new, now), (old, then))
    if change <= limit or (min(times) <= explained and bound >= CPU_BOUND):
        return None  # within the threshold, or a CPU-bound command's CPU time vouches for its wall time
    test = _tested("wall", entry.p_value)
    context = f" while {load_said(now, then)}" if busy or throttled(now, then) else ""
    figures = (  # after a colon: the load's words may end in a bracket, and one never follows another
        f"{min(times) * 1e3:.3g} ms against the baseline's {min(old_times) * 1e3:.3g} ms ({test}), beyond {flag} %"
    )
    can_add = f"what load can add to its {cpu[len(cpu) // 2] * 1e3:.3g} ms of CPU time (up to {explained * 1e3:.3g} ms)"
    if min(times) <= explained:
        of = "the time its CPU quota left it (it mostly waits, or the quota held it back longer than it was read)"
        of = of if throttled(now, then) else "its wall time (it mostly waits, or the load slowed both sides)"
        reason = (
            f"{shown_change(change)} % slower {_basis('wall', True)}{context}: {figures} but within {can_add}; its CPU "
            f"time is at most {bound * 100:.0f} % of {of}, and CPU time and instructions count no wait: "
            "they cannot say the load slowed it, not a longer wait"
        )
        return Decision(new.command.name, "wall", INCONCLUSIVE, change, entry.p_value, reason)
    reason = (
        f"{_basis('wall', True)}{context}: {figures} and beyond {can_add}: it waits longer "
        "(sleep, I/O, a lock), which CPU time and instructions do not count"
    )
    return Decision(new.command.name, "wall", REGRESSED, change, entry.p_value, reason)


def _bound(*sides) -> float:
    """How CPU-bound a command is: its fastest run's CPU time over the part of its fastest wall
    time its quota let it have a CPU (``Load.quota_held``: 0.25 CPU stretches a CPU-bound run
    four times), on the side that reads it highest (load only lowers it; the others' is not
    taken off: beside it a command that waits would read CPU-bound). ``sides``: (runs, Load)."""
    held = [(runs, 1 - min(load.quota_held() if load else 0.0, 0.95)) for runs, load in sides]
    return max(
        (min(r.cpu_times) / (min(r.times) * left) for r, left in held if r.cpu_times and r.times and min(r.times) > 0),
        default=0.0,
    )


def _way(entry, figure: str, change: float, by: str, threshold: float, flag: str) -> str:
    """A passing change with its direction and where it stands against the threshold
    (``3.9 % slower by the mean wall time, within --fail-if-slower 5 %``; ``12.0 % faster by
    ...``), after the test's verdict where that is not the direction already said (``no
    significant change: 7.5 % slower ...``); a direction the fastest runs went against is the
    means' (``baseline._entry``): ``55.2 % slower by the mean CPU time, but 30.0 % faster ...``."""
    verdict = entry.verdict
    if change == 0:  # exactly: a change that rounds to nothing keeps its direction (``shown_change``)
        return f"{verdict}: 0.0 % {by}"
    way = "slower" if change > 0 else "faster"
    bound = "" if change < 0 else f", within {flag} %" if change <= threshold else f", beyond {flag} %"
    lead = "" if verdict == way else f"{verdict}: "
    if verdict in ("slower", "faster") and verdict != way and entry.change_percent is not None:
        lead = f"{shown_change(entry.change_percent)} % {verdict} {_basis(figure, False)}, but "
    return f"{lead}{shown_change(change)} % {way} {by}{bound}"


def _basis(figure: str, fastest: bool) -> str:
    """Which figure a change rests on, said after it (``52.0 % slower by the mean CPU time``), as
    the baseline's block says its ratio of the means (``baseline.describe``): the fastest run's
    where the load was allowed for that way, else the mean's."""
    return f"by the fastest run's {WHY[figure]}" if fastest else f"by the mean {WHY[figure]}"


def _tested(figure: str, p_value: float | None) -> str:
    """What goes in the bracket after a change: why its figure is one load does not move
    (``HOW``), then the test (``CPU time (user+system ...; Mann-Whitney U p = 0.001)``)."""
    test = f"Mann-Whitney U p = {p_value:.2g}" if p_value is not None else TOO_FEW
    return f"{HOW[figure]}; {test}" if figure in HOW else test


def percent(threshold: float) -> str:
    """The threshold as a user writes it (``5``, ``2.5``, ``1000000``), never ``1e+06``."""
    return f"{threshold:.15g}"


def to_json(decisions: list[Decision], threshold: float) -> dict:
    return {
        "threshold_percent": threshold,
        "busy_share": BUSY_SHARE,
        "contention_allowance_percent": CONTENTION_ALLOWANCE,
        "commands": [d._asdict() for d in decisions],
    }
