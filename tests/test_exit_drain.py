"""A root that exits while a descendant still holds the run's stdout or stderr: the run reads the
pipes on (echo, capture) until they reach end of file or ``race.EXIT_DRAIN_SECONDS`` (the
reference's pump-teardown bound) have passed since the root's exit, and only then does the root's
exit end the run: ``root_exited`` with the root's code, the summary, the kill of what is left
(docs/run.md §3). A descendant that left the pipes holds nothing up."""

from __future__ import annotations

import os
import signal
import subprocess

from conftest import (
    SAFETY_NET,
    SHORT_EXIT_DRAIN,
    ended_after,
    full_pipe,
    patched_cli,
    pid_alive,
    reaped,
    run_cli,
    start_cli,
    wait_for_file,
)
from streams import by_name, check_stream, one, run_checked, seconds_between

from processkit.engine.race import EXIT_DRAIN_SECONDS
from processkit.engine.teardown import ECHO_STALL_SECONDS

CADENCE = 0.2  # the grandchild's heartbeat: the reference's is 1 s, checked over 3 s

# Writes its pid to $HB.pid, then appends to $HB every CADENCE seconds, ~30 s at most (a teardown
# regression ends by itself); it keeps the stdout it inherited. Its first append comes one cadence
# after its start (the reference's comes at once, racing the kill of a runner that ends the run at
# the root's exit).
GRANDCHILD = f'echo $$ > "$HB.pid"\ni=0\nwhile [ "$i" -lt 150 ]; do\n  sleep {CADENCE}\n  printf x >> "$HB"\n  i=$((i + 1))\ndone\n'


def _size(path) -> int:
    return path.stat().st_size if path.exists() else 0


def _gone(heartbeat) -> None:
    """The grandchild (its pid in ``$HB.pid``) is dead once the runner returned."""
    pid = int((heartbeat.parent / (heartbeat.name + ".pid")).read_text())
    assert not pid_alive(pid), "a leaked descendant outlived the run"


def test_tears_down_a_leaked_descendant(tmp_path):
    """The reference's ``tears_down_a_leaked_descendant``: the root starts the heartbeat
    grandchild and exits 0; the grandchild ran before the teardown (its pipe held the run), and
    not after it. The one test run against the real bound (5 s), as the reference's is: shortened
    to 0.5 s, a loaded host's late first heartbeat (0.2 s in) would fail it."""
    heartbeat = tmp_path / "heartbeat.txt"
    grandchild = tmp_path / "grandchild.sh"
    grandchild.write_text(GRANDCHILD)
    root = tmp_path / "root.sh"
    root.write_text('#!/bin/sh\nsh "$GRANDCHILD" &\nexit 0\n')
    env = {"HB": str(heartbeat), "GRANDCHILD": str(grandchild)}
    proc, _ = run_checked(tmp_path, *(f"--env={k}={v}" for k, v in env.items()), command=["/bin/sh", root])
    assert proc.returncode == 0, proc.stderr
    assert _size(heartbeat) > 0, "the grandchild must have started heartbeating before teardown"
    _gone(heartbeat)


def test_a_descendant_holding_the_pipe_is_read_until_the_bound_then_killed(tmp_path):
    """What the grandchild writes after the root's exit is echoed and captured; at the bound
    (shortened here) the root's exit ends the run with the root's code and the grandchild is
    killed by the teardown."""
    heartbeat, jsonl, captured = tmp_path / "heartbeat.txt", tmp_path / "run.jsonl", tmp_path / "capture"
    # The grandchild waits for the root to be gone (reaped) before it writes anything.
    after = f'while kill -0 "$1" 2>/dev/null; do sleep 0.01; done\necho after-exit\n{GRANDCHILD}'
    script = f"sh -c '{after}' grandchild $$ &\nexit 7\n"
    command = ["run", "--jsonl", jsonl, "--capture-dir", captured, f"--env=HB={heartbeat}", "--", "sh", "-c", script]
    proc = run_cli(*command, patched=SHORT_EXIT_DRAIN)
    assert (proc.returncode, proc.stdout.count(b"after-exit\n")) == (7, 1), proc.stderr
    assert b"after-exit\n" in (captured / "stdout.log").read_bytes()
    events = check_stream(jsonl, 7)
    assert one(events, "root_exited")["code"] == 7
    assert one(events, "cleanup_started")["members_before"] >= 1, "the grandchild was alive at the teardown"
    bound = float(SHORT_EXIT_DRAIN[2])
    assert seconds_between(events, "run_started", "root_exited") >= bound - 0.01  # ms resolution
    assert _size(heartbeat) > 0
    _gone(heartbeat)


def test_a_descendant_that_left_the_pipes_holds_nothing_up(tmp_path):
    """A grandchild that closes its stdout and stderr at once and lives on: the root's exit
    ends the run at once (well inside the bound), and the teardown kills the grandchild."""
    script = "sh -c 'exec >&- 2>&-; sleep 300' &\nexit 3\n"
    _, events = run_checked(tmp_path, command=["sh", "-c", script], returncode=3)
    assert seconds_between(events, "run_started", "root_exited") < EXIT_DRAIN_SECONDS / 2
    assert one(events, "cleanup_started")["members_before"] >= 1


def test_a_timeout_during_the_drain_is_the_runs_timeout(tmp_path):
    """The reference races its deadlines until its wait, pipes included, returns: a --timeout
    that expires while a descendant holds the pipe ends the run as a timeout (106). The
    descendant says the root is gone (reaped) on the pipe it holds, which the run echoes: the
    root had exited before the deadline ended the run."""
    gone = 'while kill -0 "$1" 2>/dev/null; do sleep 0.01; done; echo root-gone; exec sleep 300'
    script = f"sh -c '{gone}' descendant $$ &\nexit 0\n"
    proc, events = run_checked(tmp_path, "--timeout", "1s", command=["sh", "-c", script], returncode=106)
    assert proc.stdout == b"root-gone\n", proc.stderr
    assert not by_name(events, "root_exited"), proc.stderr
    assert one(events, "timeout")["reason"] == "overall"


def test_a_run_that_reads_no_pipe_ends_at_the_roots_exit(tmp_path):
    """``--inherit-stdio``: the child writes to the runner's own descriptors, no pipe is read
    (the reference's: no pump), so a descendant holding them holds no run up."""
    jsonl = tmp_path / "run.jsonl"
    script = "sleep 300 &\nexit 4\n"  # the sleep keeps the runner's stdout and stderr: not ours to read
    runner = start_cli(
        "run", "--jsonl", jsonl, "--inherit-stdio", "--", "sh", "-c", script,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert runner.wait(SAFETY_NET) == 4
    events = check_stream(jsonl, 4)
    assert seconds_between(events, "run_started", "root_exited") < EXIT_DRAIN_SECONDS / 2
    assert one(events, "cleanup_started")["members_before"] >= 1


def test_a_stop_signal_in_the_exit_window_cuts_the_echo_short(tmp_path):
    """A SIGINT while a descendant holds the pipe after the root's exit ends the run and gives up
    the echo backlog at once, as one during the teardown does: the echo's stall bound (patched
    long here) is not waited out for a reader that takes nothing."""
    mark, stall = tmp_path / "root-gone", ECHO_STALL_SECONDS * 6
    gone = f'while kill -0 "$1" 2>/dev/null; do sleep 0.01; done; : > {mark}; exec sleep 300'
    script = f"head -c 300000 /dev/zero; sh -c '{gone}' descendant $$ &\nexit 0\n"
    patched = ("teardown", "ECHO_STALL_SECONDS", str(stall), "race", "EXIT_DRAIN_SECONDS", str(stall * 2))
    command = ["run", "--jsonl", tmp_path / "run.jsonl", "--", "sh", "-c", script]
    unread, stdout = os.pipe()  # a reader that takes nothing
    try:
        with reaped(start_cli(*command, patched=patched, stdout=stdout)) as runner:
            os.close(stdout)
            wait_for_file(mark)  # the root is reaped: the window is open
            runner.send_signal(signal.SIGINT)
            took, err = ended_after(runner)
    finally:
        os.close(unread)
    assert b"a stop signal cut the echo of the runner's stdout short" in err, err
    assert took < stall / 2, err


def test_a_root_that_exits_in_the_teardowns_grace_leaves_the_echo_its_whole_bound(tmp_path):
    """The ending was decided (a timeout) and the root exits on its SIGTERM while a descendant
    that ignores it holds stdout, a pipe nobody reads: no exit window opens, and the echo's
    stall clock starts at the drain, after the grace, not at the root's exit inside it (which
    left the drain 1 s of a 3 s bound here: the grace had eaten the rest)."""
    jsonl = tmp_path / "run.jsonl"
    script = '(trap "" TERM; sleep 30) & head -c 300000 /dev/zero; sleep 100'
    command = patched_cli("teardown", "ECHO_STALL_SECONDS", "3.0")
    command += ["run", "--jsonl", str(jsonl), "--timeout", "1s", "--grace", "2s", "--", "sh", "-c", script]
    read_end, write_end = full_pipe()
    try:
        done = subprocess.run(command, stdout=write_end, stderr=subprocess.PIPE, timeout=SAFETY_NET)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert done.returncode == 106, done.stderr
    events = check_stream(jsonl, 106)
    assert seconds_between(events, "cleanup_finished", "runner_exit") >= 2.5, done.stderr


def test_an_escapee_holding_the_pipes_costs_the_exits_bound_alone(tmp_path, monkeypatch):
    """A process-group escapee (``setsid``) that keeps the pipes outlives the teardown: the exit's
    bound read them, and the drain after the teardown waits for them no longer (it waited
    ``teardown.PUMP_DRAIN_SECONDS`` more: 7 s after the exit in all, where the reference's one
    ``PUMP_TEARDOWN`` stops at 5 s). The drain's bound is lengthened here, so a drain that waits it
    shows; the escapee is then ended by the sweep, and said."""
    monkeypatch.setenv("PROCESSKIT_CONTAINMENT", "process_group")
    drain = 8.0
    escapee = "echo $$ > escapee.pid; : > escapee.noted; exec sleep 600"
    script = f"(setsid sh -c '{escapee}' &); while [ ! -e escapee.noted ]; do :; done; echo last"
    jsonl = tmp_path / "run.jsonl"
    command = [*patched_cli(*SHORT_EXIT_DRAIN, "teardown", "PUMP_DRAIN_SECONDS", repr(drain)), "run", "--jsonl", jsonl]
    runner = subprocess.Popen(
        [*command, "--", "sh", "-c", script], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    with reaped(runner):
        stdout, stderr = runner.communicate(timeout=SAFETY_NET)
    assert runner.returncode == 0, stderr
    assert stdout == b"last\n"
    events = check_stream(jsonl, 0)
    assert seconds_between(events, "run_started", "root_exited") >= float(SHORT_EXIT_DRAIN[2]) - 0.1  # the exit's bound
    assert seconds_between(events, "cleanup_finished", "runner_exit") < drain / 4, (
        "the drain waited on the escapee's pipes"
    )
    assert not pid_alive(int((tmp_path / "escapee.pid").read_text()))
    assert b"1 process(es) of this run had left its process group" in stderr


def test_a_captured_pipe_held_by_an_escapee_keeps_the_drains_bound_in_either_pump(tmp_path, monkeypatch, pump_backend):
    """With ``--capture-dir`` the drain after the teardown waits its whole bound on a pipe an
    escapee holds, whichever pump reads it (the native one's thread, or the loop): what the
    escapee writes once the teardown is over is still captured (docs/threat-model.md). The
    escapee writes it when ``cleanup_finished`` is out, then ends, which ends the drain."""
    monkeypatch.setenv("PROCESSKIT_CONTAINMENT", "process_group")
    seen = "grep -q cleanup_finished run.jsonl 2>/dev/null"
    escapee = f'echo esc; i=0; while [ "$i" -lt 3000 ] && ! {seen}; do sleep 0.01; i=$((i + 1)); done; echo late'
    script = f"(setsid sh -c '{escapee}' &); echo last"
    jsonl, captured = tmp_path / "run.jsonl", tmp_path / "capture"
    command = ["run", "--jsonl", jsonl, "--capture-dir", captured, "--", "sh", "-c", script]
    runner = start_cli(*command, patched=SHORT_EXIT_DRAIN, cwd=tmp_path)
    with reaped(runner):
        stdout, stderr = runner.communicate(timeout=SAFETY_NET)
    assert runner.returncode == 0, stderr
    assert b"late\n" in (captured / "stdout.log").read_bytes(), stderr
    assert b"late\n" in stdout, stderr
    check_stream(jsonl, 0)
