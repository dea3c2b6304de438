"""Hostile children: programs that fight the runner's assumptions. Each run ends as documented,
with a complete stream and, where the mechanism can reach the whole tree, a confirmed-empty
teardown (cleanup_finished: remaining 0, kill_error and read_error false).

Where the mechanisms differ the test runs under both: a process group cannot hold a ``setsid``
escapee, which outlives the teardown; the run still ends, bounded by the runner's output drain,
and the runner (its subreaper) then kills it and says so on stderr.

Covered elsewhere, not repeated here: an 80 MiB line without a newline and a slow or stalled
echo consumer (test_capture.py), a stalled consumer under a timeout (test_run_deadlines.py),
escapees at a natural exit (test_run_containment.py).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time

import pytest

from conftest import SAFETY_NET, SHORT_EXIT_DRAIN, pid_alive, run_cli, start_cli, wait_for_event, wait_for_file
from streams import check_stream, one, require_mechanism, run_checked, seconds_between, wait_until

PUMP_DRAIN_SECONDS = 2.0  # the runner's bound on reading pipes an escapee still holds
# "At once" for a runner whose pipes closed, beside the drain bound it must not wait out: a loaded
# 2-core machine may hold the runner's last steps up for some 100 ms, never for the bound's 2 s.
PROMPTLY = PUMP_DRAIN_SECONDS - 0.5


def assert_confirmed_empty(events: list[dict]) -> None:
    finished = one(events, "cleanup_finished")
    assert (finished["remaining"], finished["remaining_pids"]) == (0, [])
    assert (finished["kill_error"], finished["read_error"]) == (False, False)


@pytest.fixture
def pids(tmp_path):
    """Pids the children write to files; any still running when the test ends is killed."""

    def read(name: str) -> int:
        path = tmp_path / f"{name}.pid"
        wait_for_file(path)
        return int(path.read_text())

    yield read
    for path in tmp_path.glob("*.pid"):
        try:
            os.kill(int(path.read_text()), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


# ``note NAME`` (in a fresh ``sh -c``, where $$ is that shell's own pid, kept across ``exec``)
# records the pid as NAME.pid atomically in the run's working directory. NAME.pid appears while
# `mv` may still be alive (one member more); NAME.noted, made by the shell itself (a redirect, no
# fork) once it has reaped `mv`, says the shell is alone again.
NOTE = "echo $$ > {0}.tmp && mv {0}.tmp {0}.pid && : > {0}.noted"


def stop_once_noted(tmp_path, *args, script: str, noted: tuple[str, ...]):
    """Run ``script`` and stop the runner (SIGTERM: 107) once every shell in ``noted`` has said
    it is alone and past its set-up: the tree the teardown counts is then the one the test
    means, however late a loaded machine lets the shells get there (a timeout set in advance
    could fall on a lingering `mv`). A stop signal's teardown is a timeout's (docs/run.md)."""
    jsonl = tmp_path / "run.jsonl"
    runner = start_cli("run", "--jsonl", jsonl, *args, "--", "sh", "-c", script, cwd=tmp_path)
    try:
        for name in noted:
            wait_for_file(tmp_path / f"{name}.noted")
        runner.send_signal(signal.SIGTERM)
        _, stderr = runner.communicate(timeout=SAFETY_NET)
    finally:
        runner.kill()
    assert runner.returncode == 107, stderr.decode(errors="replace")
    assert b"Traceback" not in stderr, stderr.decode(errors="replace")
    return stderr, check_stream(jsonl, 107)


def test_a_tree_that_ignores_sigterm_is_escalated_after_the_grace(tmp_path, containment, pids):
    """Root and grandchild both ignore SIGTERM; the stop's soft stop cannot end them, the
    grace runs out and the container's hard kill does."""
    grandchild = NOTE.format("grandchild") + "; exec sleep 60"
    script = f"trap '' TERM; sh -c '{grandchild}' & {NOTE.format('root')}; exec sleep 60"
    _, events = stop_once_noted(tmp_path, "--grace", "200ms", script=script, noted=("root", "grandchild"))
    require_mechanism(events, containment)
    assert one(events, "cancelled")["grace_ms"] == 200
    shutdown = one(events, "cleanup_finished")["shutdown"]
    assert (shutdown["members_before"], shutdown["drained_within_grace"], shutdown["escalated"]) == (2, False, True)
    assert shutdown["elapsed_ms"] >= 200
    assert_confirmed_empty(events)
    assert not pid_alive(pids("root")) and not pid_alive(pids("grandchild"))


def test_a_thousand_short_lived_children_leave_nothing(tmp_path, containment):
    """None of them is waited for by the root: whoever adopts them must reap them."""
    script = "i=0; while [ $i -lt 1000 ]; do ( exit 0 ) & i=$((i+1)); done; echo forked"
    proc, events = run_checked(tmp_path, command=["sh", "-c", script], returncode=0)
    require_mechanism(events, containment)
    assert proc.stdout == b"forked\n"
    assert one(events, "root_exited")["code"] == 0
    assert_confirmed_empty(events)


def test_a_tree_still_forking_at_its_timeout_is_torn_down_whole(tmp_path, containment):
    """New children keep appearing while the teardown runs; none may be left over. (Bounded at
    20000 forks, so a teardown that misses the loop fails the test instead of the host.) The
    first 12 children stay until they are ended, so the tree holds at least 10 at the timeout
    however slowly a loaded host forks (at 300 ms and children of 0.2 s, a CI host at load 12
    had 4 alive); the loop still forks then (20000 take seconds)."""
    script = "i=0; while [ $i -lt 20000 ]; do if [ $i -lt 12 ]; then ( sleep 60 ) & else ( sleep 0.2 ) & fi; i=$((i+1)); done"
    _, events = run_checked(tmp_path, "--timeout", "1s", command=["sh", "-c", script], returncode=106)
    require_mechanism(events, containment)
    assert one(events, "cleanup_started")["members_before"] >= 10
    assert_confirmed_empty(events)


def test_a_setsid_escapee_holding_stdout_cannot_keep_the_run_alive(tmp_path, containment, pids):
    """A double fork into a new session that keeps the output pipes, then a stop. cgroup v2
    still holds the escapee and kills it. A process group cannot: the escapee outlives the
    teardown, which ends once the runner's output drain gives up on the pipes it holds,
    PUMP_DRAIN_SECONDS after it; the runner, its subreaper, then kills it and says so."""
    escapee = NOTE.format("escapee") + "; exec sleep 60"
    script = f"(setsid sh -c '{escapee}' &); {NOTE.format('root')}; exec sleep 60"
    stderr, events = stop_once_noted(tmp_path, script=script, noted=("root", "escapee"))
    require_mechanism(events, containment)
    assert_confirmed_empty(events)
    assert not pid_alive(pids("root"))
    lingered = seconds_between(events, "cleanup_finished", "runner_exit")
    if containment == "cgroup_v2":
        assert one(events, "cleanup_started")["members_before"] == 2
        assert not pid_alive(pids("escapee")) and lingered < PROMPTLY
    else:
        assert one(events, "cleanup_started")["members_before"] == 1
        assert not pid_alive(pids("escapee")), "the escapee outside the process group outlived the run"
        assert b"1 process(es) of this run had left its process group" in stderr
        assert PUMP_DRAIN_SECONDS - 0.1 <= lingered < PUMP_DRAIN_SECONDS + 1.5  # the escapee holds them 60 s


def test_a_child_that_closes_its_output_is_still_waited_for(tmp_path):
    """EOF on both pipes is not an exit: the run ends when the child does, with its code."""
    script = "exec >&- 2>&-; sleep 0.3; exit 5"
    proc, events = run_checked(tmp_path, command=["sh", "-c", script], returncode=5)
    assert (proc.stdout, proc.stderr) == (b"", b"")
    assert one(events, "root_exited")["code"] == 5
    # run_started is stamped after the clone, so the child's 0.3 s can read a little shorter; a run
    # that took EOF for the exit would end at once
    assert seconds_between(events, "run_started", "root_exited") >= 0.2
    assert_confirmed_empty(events)


def test_a_grandchild_holding_stdout_after_the_root_exits_is_killed_and_reaped(tmp_path, containment, pids):
    """The root exits at once; its background grandchild keeps the output pipe. Once the pipes
    had their bound after the root's exit (shortened here: tests/test_exit_drain.py), the
    natural exit's teardown kills it (it is in the group under either mechanism), so the pipe
    closes and the run ends promptly instead of waiting for the drain bound after the teardown."""
    grandchild = NOTE.format("grandchild") + "; exec sleep 60"
    script = f"sh -c '{grandchild}' & while [ ! -e grandchild.noted ]; do sleep 0.01; done; echo bye; exit 7"
    proc, events = run_checked(
        tmp_path, command=["sh", "-c", script], returncode=7, cwd=tmp_path, patched=SHORT_EXIT_DRAIN
    )
    require_mechanism(events, containment)
    assert proc.stdout == b"bye\n"
    assert one(events, "cleanup_started")["members_before"] == 1
    assert_confirmed_empty(events)
    assert seconds_between(events, "root_exited", "runner_exit") < PROMPTLY
    grandchild_pid = pids("grandchild")
    assert not pid_alive(grandchild_pid)
    if containment == "process_group":  # the runner is the subreaper; under cgroup v2, init is
        wait_until(lambda: not os.path.exists(f"/proc/{grandchild_pid}"), what="the grandchild's reaping")


def test_a_flood_with_nobody_reading_leaves_the_control_plane_responsive(tmp_path):
    """The child writes as fast as it can and the runner's stdout is never read: the echo backs
    up, the pump stops reading (backpressure), and still inspect answers and cancel ends the run."""
    jsonl = tmp_path / "run.jsonl"
    flood = "import os\nchunk = b'x' * 65536\nwhile True:\n    os.write(1, chunk)\n    os.write(2, chunk)\n"
    runner = start_cli("run", "--jsonl", jsonl, "--run-id", "flood", "--", "python3", "-c", flood)
    try:
        wait_for_event(jsonl, "members_snapshot")
        time.sleep(0.3)  # the scenario itself: give the flood time to fill every buffer
        inspected = run_cli("inspect", "--run-id", "flood", "--json", timeout=60)
        assert inspected.returncode == 0, inspected.stderr
        assert run_cli("cancel", "--run-id", "flood", timeout=60).returncode == 0
        runner.stdout.close()
        runner.stderr.close()
        assert runner.wait(timeout=60) == 108
    finally:
        runner.kill()
    events = check_stream(jsonl, 108)
    assert_confirmed_empty(events)


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("VmRSS:"))


def _settled_fds(pid: int) -> int:
    """The runner's descriptors, less the ones a snapshot or a closing connection holds for a
    moment: the fewest seen over a few looks."""
    counts = []
    for _ in range(5):
        counts.append(len(os.listdir(f"/proc/{pid}/fd")))
        time.sleep(0.01)
    return min(counts)


def test_a_client_hammering_the_control_socket_costs_the_runner_nothing_lasting(tmp_path):
    """Thousands of inspect requests in a burst: every one is answered, and the runner keeps
    neither descriptors nor the memory of finished connections. (A cancelled connection timer
    held its connection, buffers and all, for its 5 s whenever a live timer sat ahead of it in
    the heap, as interval snapshots' do: ~2 KiB a request.)"""
    jsonl = tmp_path / "run.jsonl"
    runner = start_cli(
        "run", "--jsonl", jsonl, "--run-id", "hammered", "--snapshot-interval", "5ms", "--", "sleep", "30"
    )
    try:
        wait_for_event(jsonl, "members_snapshot")
        endpoint = json.loads(run_cli("list", "--json").stdout)["endpoint"]

        def burst(count: int) -> None:
            for _ in range(count):
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                    sock.connect(endpoint)
                    sock.sendall(b"inspect\n")
                    assert sock.makefile("rb").readline().startswith(b'{"snapshot_version"')

        burst(300)  # the allocator settles
        fds, rss = _settled_fds(runner.pid), _rss_kib(runner.pid)
        burst(4000)
        assert _settled_fds(runner.pid) == fds
        assert _rss_kib(runner.pid) - rss < 3072, "the runner kept memory from finished connections"
        assert run_cli("cancel", "--run-id", "hammered").returncode == 0
        assert runner.wait(timeout=60) == 108
    finally:
        runner.kill()
        runner.wait()
    assert_confirmed_empty(check_stream(jsonl, 108))
