"""The native pump's splice of an echo-only stream into a pipe goes on after a short splice
(csrc/pump.c): where the next splice moves nothing, the ordinary read says whether the child's
pipe is empty for now (the drain ends), at its end (EOF), or the echo is full (the chunk read is
queued and the stream waits for the echo's room).
Before, a short splice ended the drain as a short read does, and one into a pipe is short
whenever the echo's pipe fills (it takes one of its 16 slots per buffer moved): the stream took a
full echo for a slow writer and waited to gather, its writer blocked and the echo's reader idle,
a line writer's echo at about a quarter of its speed (bench/README.md, "The echo into a pipe its
reader drains"). Seen from outside: the runner under ``strace``, each splice that moved bytes
followed by another splice. Seen by the caller of one drain, whose splice fills the echo while
the child's pipe holds more: tests/test_pump_equivalence.py's
test_spliced_echo_into_a_full_pipe_queues_and_pauses_like_a_write."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import SAFETY_NET, cli_command, full_pipe, patched_cli
from processkit import native

PIECE = b"x" * 99 + b"\n"
COUNT = 3000  # 300,000 bytes in one write: more than the echo's pipe holds
needs_native_pump = pytest.mark.skipif(
    native.module() is None or os.environ.get("PROCESSKIT_PUMP") == "python",
    reason="the runner's pump is the Python one here: it never splices",
)


@needs_native_pump
@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace(1) to see the runner's splices")
def test_a_short_splice_is_followed_by_another_splice(tmp_path):
    trace = tmp_path / "trace"
    child = f"import os, sys; os.write(1, {PIECE!r} * {COUNT})"
    # signal=none: a child's SIGCHLD line met between two splices is not the next call
    strace = ["strace", "-qq", "-e", "trace=splice,epoll_wait,poll,clock_nanosleep", "-e", "signal=none"]
    done = subprocess.run(
        [*strace, "-o", str(trace), *cli_command()]
        + ["run", "--jsonl", str(tmp_path / "run.jsonl"), "--", sys.executable, "-c", child],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=SAFETY_NET,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == PIECE * COUNT
    calls = trace.read_text().splitlines()
    moved = [at for at, call in enumerate(calls) if re.fullmatch(r"splice\(.*\) = [1-9][0-9]*", call)]
    assert moved, "\n".join(calls)  # the native pump splices an echo-only stream into a pipe
    after = [calls[at + 1] if at + 1 < len(calls) else "" for at in moved]
    assert all(call.startswith("splice(") for call in after), "\n".join(calls)


@pytest.mark.parametrize("pump", ["native", "python"])
def test_a_child_that_ends_beside_a_full_echo_ends_its_run_at_its_exit(tmp_path, pump):
    """The runner's stdout a pipe full to the brim that nobody reads, a child that writes nothing:
    with SPLICE_F_NONBLOCK the kernel fails a splice from a pipe at its end into a full one with
    EAGAIN, as for an empty pipe, so the native pump never saw the end of file: the run waited out
    the exit's wait for held pipes and the drain after the teardown (7 s; here both 60 s, so the
    safety net), where it has nothing to write and ends at its child's exit."""
    if pump == "native" and native.module() is None:
        pytest.skip("no native pump in this build")
    read_end, write_end = full_pipe()
    try:
        bounds = ("teardown", "PUMP_DRAIN_SECONDS", "60.0")
        command = [*patched_cli("race", "EXIT_DRAIN_SECONDS", "60.0", *bounds)]
        command += ["run", "--jsonl", str(tmp_path / "run.jsonl"), "--", "true"]
        env = {**os.environ, "PROCESSKIT_PUMP": pump}
        done = subprocess.run(command, stdout=write_end, stderr=subprocess.PIPE, env=env, timeout=SAFETY_NET)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert done.returncode == 0, done.stderr
