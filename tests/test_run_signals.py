"""Stop signals sent to the runner: SIGINT, SIGTERM and SIGHUP cancel the run (107) with the
right ``cancelled.source``; a signal ignored when the runner started stays ignored; repeats
during teardown are absorbed."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from conftest import SAFETY_NET, pid_alive, read_events_tolerant, start_cli, wait_for_event, wait_for_file
from streams import PY, check_stream, one, require_mechanism, run_checked, wait_until

SOURCES = {signal.SIGINT: "ctrl_c", signal.SIGTERM: "sigterm", signal.SIGHUP: "sighup"}
# How the stderr headline names each: the reference's words ("run cancelled (SIGTERM)").
NAMED = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}


def start_sleeper(tmp_path, *args, **kwargs):
    """A run whose child sleeps; returns once the runner has reported the spawned child."""
    jsonl = tmp_path / "run.jsonl"
    proc = start_cli("run", "--jsonl", jsonl, *args, "--", "sleep", "30", **kwargs)
    wait_for_event(jsonl, "members_snapshot")
    return proc, jsonl


@pytest.mark.parametrize("signum", list(SOURCES), ids=lambda s: signal.Signals(s).name)
def test_a_stop_signal_cancels_the_run(tmp_path, signum):
    proc, jsonl = start_sleeper(tmp_path)
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=SAFETY_NET)
    events = check_stream(jsonl, 107)
    cancelled = one(events, "cancelled")
    assert (cancelled["source"], cancelled["grace_ms"]) == (SOURCES[signum], None)
    assert events[-1]["source"] == "cancelled"
    assert one(events, "cleanup_finished")["soft_terminate"] == "signalled"
    assert stderr.decode().splitlines() == [
        f"processkit-cli: run cancelled ({NAMED[signum]}): sent SIGTERM to the process tree "
        "(capability scope: whole_tree), then hard-killed any survivors via the container"
    ]
    assert not pid_alive(one(events, "run_started")["root_pid"])


def test_a_stop_signal_right_after_spawn_still_cancels_the_run(tmp_path):
    """The first line is written before the race starts: the runner must already be watching."""
    jsonl = tmp_path / "run.jsonl"
    proc = start_cli("run", "--jsonl", jsonl, "--", "sleep", "30")
    deadline = time.monotonic() + 10
    while not (jsonl.exists() and jsonl.stat().st_size) and time.monotonic() < deadline:
        pass  # no sleep: the window being tested is shorter than any poll interval
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=SAFETY_NET)
    assert proc.returncode == 107
    assert one(check_stream(jsonl, 107), "cancelled")["source"] == "sigterm"


def test_cancellation_tears_down_under_either_mechanism(tmp_path, containment):
    proc, jsonl = start_sleeper(tmp_path, "--grace", "2s")
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=SAFETY_NET)
    events = check_stream(jsonl, 107)
    require_mechanism(events, containment)
    assert one(events, "cancelled")["grace_ms"] == 2000
    shutdown = one(events, "cleanup_finished")["shutdown"]
    assert (shutdown["drained_within_grace"], shutdown["members_after"]) == (True, 0)


def _caught_and_ignored(pid: int) -> tuple[int, int]:
    fields = dict(line.split(":\t") for line in open(f"/proc/{pid}/status").read().splitlines() if ":\t" in line)
    return int(fields["SigCgt"], 16), int(fields["SigIgn"], 16)


@pytest.mark.parametrize("ignored", [False, True], ids=["default", "ignored-at-start"])
def test_a_signal_ignored_at_start_stays_ignored(tmp_path, ignored):
    """Under ``nohup``-like starts SIGTERM has no effect; otherwise the runner catches it."""

    def ignore_sigterm():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    jsonl, release = tmp_path / "run.jsonl", tmp_path / "release"
    proc = start_cli(
        "run",
        "--jsonl",
        jsonl,
        "--",
        "sh",
        "-c",
        f"while [ ! -e {release} ]; do sleep 0.01; done",
        preexec_fn=ignore_sigterm if ignored else None,
    )
    wait_for_event(jsonl, "members_snapshot")
    caught, ignored_mask = _caught_and_ignored(proc.pid)
    bit = 1 << (signal.SIGTERM - 1)
    assert (bool(caught & bit), bool(ignored_mask & bit)) == (not ignored, ignored)
    assert caught & (1 << (signal.SIGHUP - 1)), "the other stop signals are still caught"
    proc.send_signal(signal.SIGTERM)  # discarded at once by the kernel when ignored
    release.touch()
    proc.communicate(timeout=SAFETY_NET)
    events = check_stream(jsonl, proc.returncode)
    expected = "cancelled" if not ignored else "root_exited"
    assert [e["event"] for e in events][2] == expected
    assert proc.returncode == (107 if not ignored else 0)


# The CLI (argv[1:]) with a SIGTERM caught in the very turn of the loop in which the root's exit
# is found, as on a loaded machine: one sent before the child exits, to a runner not yet given a
# CPU, is delivered only as the wait that found the exit returns (the kernel hands a woken wait
# its events before it looks for a signal), and its handler may run as late as the end of that
# turn's callbacks, after the wake-up pipe's. So it is sent there, once the reaper has routed the
# root's exit from a callback; at once where the exit is found after them, by the turn's own
# dispatch of a SIGCHLD (``Host.turned``).
SIGNAL_AS_THE_EXIT_IS_FOUND = r"""
import os, signal, sys
from processkit import loop
from processkit.engine import reaper
from processkit.cli.main import main

real_exited, real_run_once = reaper.Reaper._exited, loop.Loop.run_once
turning = found = False

def run_once(self, max_wait=None):
    global turning, found
    turning = True
    try:
        real_run_once(self, max_wait)
    finally:
        turning = False
    if found:
        found = False
        os.kill(os.getpid(), signal.SIGTERM)

def exited(self, pid):
    global found
    reaper.Reaper._exited = real_exited
    if turning:
        found = True
    else:
        os.kill(os.getpid(), signal.SIGTERM)
    real_exited(self, pid)

loop.Loop.run_once, reaper.Reaper._exited = run_once, exited
sys.exit(main(sys.argv[1:]))
"""


def test_a_stop_signal_caught_in_the_turn_that_finds_the_roots_exit_beats_the_roots_exit(tmp_path):
    """The signal's handler ran before the turn's runs resumed: it ranks in that turn and beats
    the exit (docs/run.md §1.3), where it was once taken a turn late, after the exit had won
    (``test_a_signal_ignored_at_start_stays_ignored`` failed so on a loaded machine). The child
    exits only once an interval snapshot says the race has begun, so the SIGCHLD the watch
    supplies as it is taken has been read by then and cannot find the exit first."""
    jsonl, release = tmp_path / "run.jsonl", tmp_path / "release"
    hold = f"while [ ! -e {release} ]; do sleep 0.01; done; exit 3"
    argv = ["run", "--jsonl", str(jsonl), "--snapshot-interval", "20ms", "--", "sh", "-c", hold]
    proc = subprocess.Popen([PY, "-c", SIGNAL_AS_THE_EXIT_IS_FOUND, *argv], stderr=subprocess.PIPE)
    try:
        wait_until(
            lambda: [e for e in read_events_tolerant(jsonl) if e.get("reason") == "interval"],
            what="an interval snapshot",
        )
    finally:
        release.touch()
    _, stderr = proc.communicate(timeout=60)
    events = check_stream(jsonl, proc.returncode)
    assert one(events, "cancelled")["source"] == "sigterm", stderr
    assert "root_exited" not in [event["event"] for event in events[: events.index(one(events, "cancelled"))]]
    assert proc.returncode == 107, stderr


def test_sigchld_is_caught_once_the_race_begins_where_the_runner_adopts_orphans(tmp_path, containment):
    """A run of either mechanism makes the runner a subreaper, whose orphans only SIGCHLD
    announces (under cgroup v2 too: an orphan that exits is charged to its group's
    ``pids.current`` until collected), so it is caught from that run's race on (an orphan that
    exited between the spawn and the race is collected on the loop's next turn, the watch
    supplying a SIGCHLD byte as it is taken:
    ``test_an_orphan_that_exited_before_the_race_began_is_collected_while_the_run_goes_on``)."""
    jsonl, release = tmp_path / "run.jsonl", tmp_path / "release"
    hold = f"while [ ! -e {release} ]; do sleep 0.01; done"
    proc = start_cli("run", "--jsonl", jsonl, "--snapshot-interval", "20ms", "--", "sh", "-c", hold)
    # The watch is taken as the race begins, after the spawn's snapshot (the streams are
    # connected between): an interval snapshot, taken from the race on, says it is there.
    events = wait_until(
        lambda: [e for e in read_events_tolerant(jsonl) if e.get("reason") == "interval"], what="an interval snapshot"
    )
    caught, ignored = _caught_and_ignored(proc.pid)
    release.touch()
    proc.communicate(timeout=SAFETY_NET)
    require_mechanism(check_stream(jsonl, 0), containment)
    bit = 1 << (signal.SIGCHLD - 1)
    assert not ignored & bit
    assert caught & bit, events


def test_an_orphan_of_a_run_is_collected_by_the_runner(tmp_path, containment):
    """The runner is the orphan's reaper under either mechanism: re-parented to it (not to the
    host's init, which would collect it as well), and its exit, announced by SIGCHLD alone, leaves
    no zombie behind while the run goes on (under cgroup v2 one would count in the group's
    ``pids.current`` until collected)."""
    jsonl, release, orphan, die = (tmp_path / name for name in ("run.jsonl", "release", "orphan", "die"))
    lives = f"echo $$ > {orphan}.tmp && mv {orphan}.tmp {orphan}; while [ ! -e {die} ]; do sleep 0.01; done"
    child = f"(sh -c '{lives}' &); while [ ! -e {release} ]; do sleep 0.01; done"
    proc = start_cli("run", "--jsonl", jsonl, "--", "sh", "-c", child)
    try:
        wait_for_file(orphan)
        pid = int(orphan.read_text())
        deadline = time.monotonic() + 60
        while (_parent_and_state(pid) or (0,))[0] != proc.pid and time.monotonic() < deadline:
            time.sleep(0.01)  # its parent, the subshell, exits at once: it is an orphan then
        adopted = _parent_and_state(pid)
        die.touch()
        state = _once_collected(pid)
    finally:
        die.touch()
        release.touch()
    proc.communicate(timeout=SAFETY_NET)
    require_mechanism(check_stream(jsonl, 0), containment)
    assert adopted is not None and adopted[0] == proc.pid, f"the orphan's parent is not the runner: {adopted}"
    assert state is None, f"the orphan stayed as {state}"


# The CLI (argv[2:]) held between its spawn and its race until the run's orphan (its pid in the
# file argv[1]) has exited, adopted by the runner: the orphan's SIGCHLD comes before the runner
# watches SIGCHLD, as on a loaded machine where the runner was held up there.
ORPHAN_EXITS_BEFORE_THE_RACE = r"""
import os, sys, time
from processkit.engine import launch
from processkit.cli.main import main

where, connect = sys.argv[1], launch.connect

def exited_orphan():
    try:
        fields = open(f"/proc/{int(open(where).read())}/stat").read().rpartition(")")[2].split()
    except (OSError, ValueError):
        return False
    return fields[:2] == ["Z", str(os.getpid())]

def late_connect(run, launched):
    deadline = time.monotonic() + 30
    while not exited_orphan() and time.monotonic() < deadline:
        time.sleep(0.01)
    connect(run, launched)

launch.connect = late_connect
sys.exit(main(sys.argv[2:]))
"""


def test_an_orphan_that_exited_before_the_race_began_is_collected_while_the_run_goes_on(tmp_path, containment):
    """The runner is a subreaper from the spawn on, but watches SIGCHLD from its race on: an
    orphan that exited between the two (its SIGCHLD dropped at the default disposition) stayed a
    zombie until the run's end. Taking the watch supplies a SIGCHLD byte, so it is collected on
    the loop's next turn."""
    jsonl, release, orphan = tmp_path / "run.jsonl", tmp_path / "release", tmp_path / "orphan"
    child = (
        f"(sh -c 'echo $$ > {orphan}.tmp && mv {orphan}.tmp {orphan}' &); while [ ! -e {release} ]; do sleep 0.01; done"
    )
    argv = [PY, "-c", ORPHAN_EXITS_BEFORE_THE_RACE, str(orphan), "run", "--jsonl", str(jsonl), "--", "sh", "-c", child]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for_file(orphan)
        state = _once_collected(int(orphan.read_text()))
    finally:
        release.touch()
    proc.communicate(timeout=SAFETY_NET)
    require_mechanism(check_stream(jsonl, 0), containment)
    assert state is None, f"the orphan stayed as {state} while the run went on"


def _once_collected(pid: int) -> tuple[int, str] | None:
    """None once ``pid`` is collected (gone from /proc); its parent and state if it is still
    there after 60 s (a bound generous for a loaded CI machine: the runner collects it on the
    loop's next turn, which a runner not given a CPU takes late)."""
    deadline = time.monotonic() + 60
    while _parent_and_state(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.02)
    return _parent_and_state(pid)


def _parent_and_state(pid: int) -> tuple[int, str] | None:
    try:
        fields = open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()
    except FileNotFoundError:
        return None
    return int(fields[1]), fields[0]


def test_repeated_signals_during_teardown_are_absorbed(tmp_path):
    jsonl, ready = tmp_path / "run.jsonl", tmp_path / "ready"
    child = f"trap '' TERM; touch {ready}; while :; do sleep 0.05; done"
    proc = start_cli("run", "--jsonl", jsonl, "--grace", "1s", "--", "sh", "-c", child)
    wait_for_file(ready)
    proc.send_signal(signal.SIGTERM)
    wait_for_event(jsonl, "cleanup_started")
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        proc.send_signal(signum)
    proc.communicate(timeout=SAFETY_NET)
    events = check_stream(jsonl, 107)
    assert one(events, "cancelled")["source"] == "sigterm"
    assert one(events, "cleanup_finished")["shutdown"]["escalated"] is True


def test_an_inherited_ignored_sigchld_does_not_lose_the_childs_status(tmp_path):
    """SIGCHLD is not a stop signal: left ignored, the kernel would reap the child unseen."""
    jsonl = tmp_path / "run.jsonl"
    proc = start_cli(
        "run",
        "--jsonl",
        jsonl,
        "--",
        "sh",
        "-c",
        "sleep 0.1; exit 3",
        preexec_fn=lambda: signal.signal(signal.SIGCHLD, signal.SIG_IGN),
    )
    proc.communicate(timeout=SAFETY_NET)
    assert proc.returncode == 3
    assert one(check_stream(jsonl, 3), "root_exited")["code"] == 3


def test_the_child_starts_with_no_blocked_signals(tmp_path):
    """A mask the runner inherited would make the child deaf to the graceful stop."""

    def block_stop_signals():
        signal.pthread_sigmask(signal.SIG_BLOCK, set(SOURCES))

    proc, _ = run_checked(
        tmp_path, command=["grep", "SigBlk", "/proc/self/status"], returncode=0, preexec_fn=block_stop_signals
    )
    assert proc.stdout == b"SigBlk:\t0000000000000000\n"


def test_the_look_before_a_spawn_reads_the_wakeup_pipe_only_once_a_signal_came(monkeypatch):
    """No signal caught: nothing is read (a spawn would pay a failed read for nothing); one
    caught: its handler runs at that look, before the loop turns."""
    import os

    from processkit.engine.signals import SignalWatch
    from processkit.loop import Loop

    loop = Loop()
    seen = []
    watch = SignalWatch(loop, {signal.SIGUSR1: seen.append})
    reads = []
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, size: reads.append(fd) or real_read(fd, size))
    try:
        watch.dispatch_caught()
        assert reads == [] and seen == []
        os.kill(os.getpid(), signal.SIGUSR1)
        watch.dispatch_caught()
        assert seen == [signal.SIGUSR1] and len(reads) == 1
        watch.dispatch_caught()
        assert len(reads) == 1, "read once per signal"
    finally:
        monkeypatch.undo()
        watch.close()
        loop.close()
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)
