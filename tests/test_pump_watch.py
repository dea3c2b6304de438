"""A captured pipe waited for without ever being polled (csrc/hasher.c, ``NativePump.watch``).

A pipe polled once (poll, select, an epoll registration) wakes its wait queue on every write for
good, a cost its writer pays per write (bench/README.md, "A capture's pipe never polled"). So a
run carried alone has its captured pipes waited for by the pump's hashing thread in a blocking
read: the pipe is never in the loop's epoll set, the bytes are exactly those written, and a pipe
an escapee keeps open still lets the run end (the thread's pending read is cancelled).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import signal
import subprocess
import time

import pytest

from conftest import SAFETY_NET, SHORT_EXIT_DRAIN, cli_command, read_events, start_cli
from own_tmp import PRIVATE_MOUNTS

try:
    from processkit import _native
except ImportError:
    _native = None

LINES = 60


def epoll_targets(pid: int) -> set[str]:
    """The inodes (hex, as fdinfo writes them) of every file in any epoll set of process ``pid``."""
    found: set[str] = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:[eventpoll]":
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as info:
                for line in info:
                    if line.startswith("tfd:"):
                        found.update(word[4:] for word in line.split() if word.startswith("ino:"))
        except OSError:  # closed meanwhile
            continue
    return found


@pytest.mark.skipif(_native is None, reason="the native module is not built")
def test_a_captured_pipe_is_never_in_the_loops_epoll_set_and_an_escapee_holding_it_lets_the_run_end(tmp_path):
    """A child writes a line every 20 ms (the stream waits for its pipe between lines), then leaves
    an escapee holding its stdout. The runner's epoll sets are read from /proc all the while: the
    child's pipe is in none of the looks (before: in most of them, between lines). The run ends
    once the held pipe is given up (after the root's exit, its bound, shortened here; then the
    drain's, 2 s), and the capture holds every line,
    digest and counts exact."""
    ino_file, pid_file, jsonl = tmp_path / "ino", tmp_path / "escapee.pid", tmp_path / "run.jsonl"
    child = (
        f"readlink /proc/self/fd/9 9>&1 > {ino_file}.part && mv {ino_file}.part {ino_file}; i=0; "
        f'while [ $i -lt {LINES} ]; do echo "line $i"; sleep 0.02; i=$((i+1)); done; '
        f"setsid -f sh -c 'echo $$ > {pid_file}; exec sleep 60'; "
        # the root ends once the escapee has told its pid from its own session: one still in the
        # root's process group at its exit is ended with it, and nothing holds the pipe
        f"while [ ! -e {pid_file} ]; do sleep 0.01; done"
    )
    # The watch needs the hashing thread, which the Popen spawn path never has (pump.hash_on_a_thread).
    env = dict(os.environ, PROCESSKIT_CONTAINMENT="process_group", PROCESSKIT_PUMP="native")
    env.update(PROCESSKIT_SPAWN="native", PROCESSKIT_HASH_THREAD="1")
    runner = start_cli(
        "run", "--jsonl", jsonl, "--capture-dir", tmp_path / "cap", "--", "sh", "-c", child,
        stdout=subprocess.DEVNULL, env=env, patched=SHORT_EXIT_DRAIN,
    )  # fmt: skip
    looks = hits = 0
    try:
        deadline = time.monotonic() + SAFETY_NET
        while not ino_file.exists():
            assert runner.poll() is None and time.monotonic() < deadline, "the child never started"
            time.sleep(0.005)
        ino = format(int(ino_file.read_text().strip()[len("pipe:[") : -1]), "x")
        while not pid_file.exists() and runner.poll() is None and time.monotonic() < deadline:
            try:
                hits += ino in epoll_targets(runner.pid)
                looks += 1
            except OSError:
                break
            time.sleep(0.005)
        assert runner.wait(SAFETY_NET) == 0
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
        try:
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
        except (OSError, ValueError):
            pass
    assert looks >= 20, f"too few looks at the runner's epoll sets: {looks}"
    assert hits == 0, f"the child's pipe was in the loop's epoll set in {hits} of {looks} looks"
    expected = "".join(f"line {i}\n" for i in range(LINES)).encode()
    (captured,) = [e for e in read_events(jsonl) if e["event"] == "output_captured"]
    stdout = captured["stdout"]
    assert (tmp_path / "cap" / "stdout.log").read_bytes() == expected
    assert (stdout["bytes_seen"], stdout["bytes_written"]) == (len(expected), len(expected))
    assert stdout["sha256"] == hashlib.sha256(expected).hexdigest()


@pytest.mark.skipif(_native is None, reason="the native module is not built")
@pytest.mark.skipif(os.geteuid() != 0, reason="masks libgcc_s in a mount namespace of its own: root only")
def test_a_host_without_the_unwinder_polls_the_pipe_instead_of_aborting_at_the_cancel(tmp_path):
    """glibc loads libgcc_s at the first pthread_cancel and aborts the process when it cannot: a
    watched pipe an escapee holds ended the run with SIGABRT and no runner_exit. Where the unwinder
    cannot be loaded, no watch is taken (the pipe is polled) and the run ends as always. The run's
    containment is its process group, so the escapee outlives it holding the pipe."""
    unwinder = "/lib/x86_64-linux-gnu/libgcc_s.so.1"
    if not os.path.exists(unwinder):
        pytest.skip(f"{unwinder} is not where this test masks it")
    cli = shlex.join(cli_command())
    jsonl = tmp_path / "events.jsonl"
    held = tmp_path / "held"  # the escapee's word, from its own session: the root ends after it
    escape = f'echo a; setsid -f sh -c "touch {held}; exec sleep 3"; while [ ! -e {held} ]; do sleep 0.01; done'
    script = (
        f"mount --bind /dev/null {unwinder} && exec env PROCESSKIT_CONTAINMENT=process_group PROCESSKIT_PUMP=native PROCESSKIT_HASH_THREAD=1 "
        f"{cli} run --jsonl {jsonl} --capture-dir {tmp_path / 'c'} --no-echo -- sh -c '{escape}'"
    )
    done = subprocess.run([*PRIVATE_MOUNTS, "sh", "-c", script], capture_output=True, timeout=60)
    if done.stderr.startswith((b"unshare:", b"mount:")):
        pytest.skip(f"no mount namespace here: {done.stderr.decode(errors='replace').strip()}")
    assert b"must be installed for pthread_cancel" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    events = {event["event"]: event for event in read_events(jsonl)}
    assert events["runner_exit"]["code"] == 0
    assert (tmp_path / "c" / "stdout.log").read_bytes() == b"a\n"
