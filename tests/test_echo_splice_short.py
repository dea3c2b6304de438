"""The native pump's splice of an echo-only stream into a pipe goes on after a short splice
(csrc/pump.c): the next splice says whether the child's pipe is empty for now (the drain ends) or
the echo is full (the ordinary way queues the chunk and the stream waits for the echo's room).
Before, a short splice ended the drain as a short read does, and one into a pipe is short
whenever the echo's pipe fills (it takes one of its 16 slots per buffer moved): the stream took a
full echo for a slow writer and waited to gather, its writer blocked and the echo's reader idle,
a line writer's echo at about a quarter of its speed (bench/README.md, "The echo into a pipe its
reader drains"). Seen from outside: the runner under ``strace``, each splice that moved bytes
followed by another splice."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from conftest import SAFETY_NET, cli_command

PIECE = b"x" * 99 + b"\n"
COUNT = 3000  # 300,000 bytes in one write: more than the echo's pipe holds


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace(1) to see the runner's splices")
def test_a_short_splice_is_followed_by_another_splice(tmp_path):
    trace = tmp_path / "trace"
    child = f"import os, sys; os.write(1, {PIECE!r} * {COUNT})"
    done = subprocess.run(
        ["strace", "-qq", "-e", "trace=splice,epoll_wait,poll,clock_nanosleep", "-o", str(trace), *cli_command()]
        + ["run", "--jsonl", str(tmp_path / "run.jsonl"), "--", sys.executable, "-c", child],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=SAFETY_NET,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == PIECE * COUNT
    calls = trace.read_text().splitlines()
    moved = [at for at, call in enumerate(calls) if call.startswith("splice(") and call.split("= ")[-1].isdigit()]
    if not moved:
        pytest.skip("the runner here splices nothing (no native pump)")
    after = [calls[at + 1] if at + 1 < len(calls) else "" for at in moved if int(calls[at].split("= ")[-1]) > 0]
    assert after and all(call.startswith("splice(") for call in after), "\n".join(calls)
