"""--timeout, --idle-timeout and --grace: deadlines fire on time, talking keeps a run alive,
a child that ignores SIGTERM is escalated after the grace, and a stalled consumer of the
runner's stdout delays nothing.

Timing bounds allow 300 ms of lateness on a loaded two-core machine; none is so loose that a
deadline firing at the wrong moment (or not at all) could pass.
"""

from __future__ import annotations

import signal
import subprocess
import time

from conftest import SAFETY_NET, pid_alive, start_cli, wait_for_event, wait_for_file
from streams import (
    check_stream,
    event_time,
    one,
    python_child,
    require_mechanism,
    run_checked,
    seconds_between,
    stderr_lines,
)

LATE = 0.3  # how late a deadline may fire
EARLY = 0.002  # event times are truncated to the millisecond


def assert_fired_on_time(events, reason: str, window_ms: int, since: float) -> None:
    fired = one(events, "timeout")
    assert (fired["reason"], fired["timeout_ms"]) == (reason, window_ms)
    late = event_time(fired) - since - window_ms / 1000
    assert -EARLY <= late <= LATE, f"the {reason} timeout fired {late:+.3f}s from its deadline"


def test_the_overall_timeout_fires_on_time(tmp_path):
    proc, events = run_checked(tmp_path, "--timeout", "500ms", command=["sleep", "30"], returncode=106)
    assert_fired_on_time(events, "overall", 500, event_time(one(events, "run_started")))
    assert one(events, "timeout")["grace_ms"] is None
    assert seconds_between(events, "timeout", "runner_exit") < LATE
    finished = one(events, "cleanup_finished")
    assert (finished["soft_terminate"], finished["shutdown"]["soft_signal"], finished["remaining"]) == (
        "signalled",
        "sent",
        0,
    )
    assert stderr_lines(proc) == [
        "processkit-cli: run timed out after 500ms: sent SIGTERM to the process tree (capability scope: whole_tree), "
        "then hard-killed any survivors via the container"
    ]
    assert not pid_alive(one(events, "run_started")["root_pid"])


def test_deadlines_centuries_away_are_merely_far(tmp_path):
    """Any u64 millisecond count is a valid duration; the loop must not choke on waiting it."""
    far = "99999999999s"
    args = ("--timeout", far, "--idle-timeout", far, "--snapshot-interval", far)
    _, events = run_checked(tmp_path, *args, command=["sh", "-c", "sleep 0.2; exit 3"], returncode=3)
    assert one(events, "root_exited")["code"] == 3


def test_the_idle_timeout_fires_on_time_for_a_silent_child(tmp_path):
    _, events = run_checked(tmp_path, "--idle-timeout", "400ms", command=["sleep", "30"], returncode=106)
    assert_fired_on_time(events, "idle", 400, event_time(one(events, "run_started")))
    assert events[-1]["source"] == "timeout"


# A shell, not Python: the idle clock runs from the spawn, and an interpreter's start-up (with the
# test's site packages) took more than the 300 ms on a loaded machine before its first dot. The
# time of the last dot is taken just before it is written (late, not early, by the printf).
TALK_THEN_GO_QUIET = (
    "printf .; i=1; while [ $i -lt 15 ]; do sleep 0.05; printf .; i=$((i + 1)); done; "
    'sleep 0.05; date +%s.%N > "$1"; printf .; exec sleep 30'
)


def test_talking_keeps_the_idle_clock_away_until_the_child_goes_quiet(tmp_path, pump_backend):
    """Sixteen dots 50 ms apart (unterminated: every raw chunk counts as output), 750 ms of
    talk against a 300 ms idle timeout, then silence."""
    last_output = tmp_path / "last-output"
    command = ["sh", "-c", TALK_THEN_GO_QUIET, "sh", str(last_output)]
    proc, events = run_checked(tmp_path, "--idle-timeout", "300ms", command=command, returncode=106)
    assert proc.stdout == b"." * 16, "the child was cut off while it was still talking"
    assert_fired_on_time(events, "idle", 300, float(last_output.read_text()))


IGNORE_SIGTERM = """
import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(sys.argv[1], "w").close()
time.sleep(30)
"""
EXIT_ON_SIGTERM = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
open(sys.argv[1], "w").close()
time.sleep(30)
"""


def cancel_when_ready(tmp_path, child: str, *args):
    """Start a run, SIGTERM the runner once the child is ready, return the checked events."""
    jsonl, ready = tmp_path / "run.jsonl", tmp_path / "ready"
    proc = start_cli("run", "--jsonl", jsonl, *args, "--", *python_child(child), ready)
    wait_for_file(ready)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=SAFETY_NET)
    assert proc.returncode == 107, stderr
    return check_stream(jsonl, 107), stderr.decode()


def test_a_child_that_ignores_sigterm_is_escalated_after_the_grace(tmp_path, containment):
    events, stderr = cancel_when_ready(tmp_path, IGNORE_SIGTERM, "--grace", "600ms")
    require_mechanism(events, containment)
    assert one(events, "cancelled")["grace_ms"] == 600
    finished = one(events, "cleanup_finished")
    shutdown = finished["shutdown"]
    assert (shutdown["escalated"], shutdown["drained_within_grace"]) == (True, False)
    assert (shutdown["members_before"], shutdown["members_after"], finished["remaining"]) == (1, 1, 0)
    assert 600 <= shutdown["elapsed_ms"] <= 600 + LATE * 1000
    # The cleanup's span holds the shutdown and the bookkeeping after it (the group's removal),
    # each allowed LATE: one 300 ms for both was exceeded by 32 ms at a load of 12.
    span = seconds_between(events, "cleanup_started", "cleanup_finished")
    assert 0.6 - EARLY <= span <= shutdown["elapsed_ms"] / 1000 + LATE
    assert "waited 600ms grace, then hard-killed" in stderr
    assert not pid_alive(one(events, "run_started")["root_pid"])


def test_a_child_that_stops_on_sigterm_ends_the_grace_early(tmp_path, containment):
    events, _ = cancel_when_ready(tmp_path, EXIT_ON_SIGTERM, "--grace", "5s")
    require_mechanism(events, containment)
    shutdown = one(events, "cleanup_finished")["shutdown"]
    assert (shutdown["escalated"], shutdown["drained_within_grace"], shutdown["members_after"]) == (False, True, 0)
    # The grace is 5 s: a wait that did not return once the tree was empty takes all of it.
    assert shutdown["elapsed_ms"] < 4000, "the grace wait did not return once the tree was empty"


FLOOD = "import os\nwhile True: os.write(1, b'x' * 65536)"


def test_a_stalled_stdout_consumer_does_not_delay_the_timeout(tmp_path, pump_backend):
    """The runner's stdout is a pipe nobody reads; the deadline and the exit stay on time."""
    jsonl = tmp_path / "run.jsonl"
    # The echo's stall bound (5 s, ProcessKit's pump teardown) at 1 s here: the deadline is the subject.
    stall = ("teardown", "ECHO_STALL_SECONDS", "1.0")
    proc = start_cli(
        "run", "--jsonl", jsonl, "--timeout", "1s", "--", *python_child(FLOOD), stderr=subprocess.DEVNULL, patched=stall
    )
    try:
        wait_for_event(jsonl, "timeout", timeout=60)
        seen = time.monotonic()
        proc.wait(timeout=60)
        exited_after = time.monotonic() - seen
    finally:
        proc.kill()
        proc.stdout.close()
    events = check_stream(jsonl, 106)
    assert_fired_on_time(events, "overall", 1000, event_time(one(events, "run_started")))
    # The runner gives a consumer the stall bound (1 s here) without progress before it drops the echo.
    assert exited_after < 1.0 + 1.0, f"the runner took {exited_after:.2f}s to exit after the timeout"
