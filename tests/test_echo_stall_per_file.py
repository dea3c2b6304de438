"""The echo's stall after the child exits is judged file by file (``echo.StallClock``): an echo
into a pipe nobody reads is given up one stall on, on its own evidence, while a slow but live
reader of the other stream keeps getting every byte; the runner's later echoes into a file it
gave up (``bench``'s next runs) wait no more. Process-level: the real CLI, real children, real
pipes; the stall made short (``teardown.ECHO_STALL_SECONDS``)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from pathlib import Path

from conftest import SAFETY_NET, patched_cli, read_events, reaped
from processkit.engine.echo import NEVER, StallClock
from streams import seconds_between

STALL = 1.0  # the echo's stall, patched: long beside the reader's pace, short beside the real 5 s
# The stall where a slow reader must not be given up: a reader unscheduled for a while on a loaded
# machine still takes a byte within it.
SLOW_STALL = 3 * STALL
SET_PIPE_SIZE = 1031  # F_SETPIPE_SZ
OUT, ERR = 2_000_000, 200_000  # stdout, read slowly: longer than the stall; stderr, past its pipe


def _holders(pid: int, pipe: os.stat_result) -> int:
    """How many of ``pid``'s descriptors are the pipe ``pipe``."""
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            found = fd.stat()
        except OSError:  # closed meanwhile
            continue
        count += (found.st_dev, found.st_ino) == (pipe.st_dev, pipe.st_ino)
    return count


def test_a_stuck_stderr_beside_a_slow_stdout_reader_is_given_up_on_its_own(tmp_path):
    """stderr a pipe nobody reads, stdout a pipe the test reads a page at a time: the stderr echo
    is given up (its private description let go) while stdout's backlog still waits, and stdout
    gets every byte. On one clock for both it was held as long as stdout's reader kept taking."""
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    fcntl.fcntl(out_write, SET_PIPE_SIZE, 4096)  # one page: what the runner holds is its backlog
    child = f"head -c {OUT} /dev/zero; head -c {ERR} /dev/zero >&2"
    try:
        runner = subprocess.Popen(
            patched_cli("teardown", "ECHO_STALL_SECONDS", repr(SLOW_STALL))
            + ["run", "--jsonl", str(tmp_path / "run.jsonl"), "--", "sh", "-c", child],
            stdin=subprocess.DEVNULL,
            stdout=out_write,
            stderr=err_write,
        )
        os.close(out_write)
        os.close(err_write)
        stuck = os.fstat(err_read)
        with reaped(runner):
            taken, after = 0, -1
            while chunk := os.read(out_read, 4096):
                taken += len(chunk)
                if after < 0 and _holders(runner.pid, stuck) < 2:  # fd 2 alone: its echo let go
                    after = taken
                if after < 0:
                    time.sleep(STALL / 100)  # the slow reader itself: a page at a time, < OUT in SLOW_STALL
            assert runner.wait(timeout=SAFETY_NET) == 0
        assert taken == OUT  # the live reader got every byte
        assert 0 <= after < OUT - 4 * 4096, "the stuck stderr was held while stdout's reader took bytes"
    finally:
        os.close(out_read)
        os.close(err_read)


class _Echo:
    """What ``StallClock`` reads of an echo."""

    def __init__(self, target: tuple[int, int]) -> None:
        self.target, self.flushed, self.backlog, self.broken, self.terminal = target, 0, b"x", False, False
        self.took_at = NEVER


def test_echoes_into_one_file_share_its_readers_progress():
    """stdout and stderr into one pipe (``2>&1``): bytes taken from either restart the file's
    clock, so neither is given up while the other is read; another file stalls on its own."""
    now = [0.0]
    out, err, other = _Echo((1, 2)), _Echo((1, 2)), _Echo((1, 3))
    clock = StallClock([out, err, other], STALL, lambda: now[0])
    for _ in range(5):
        clock.limits()
        now[0] += STALL * 0.6
        out.flushed += 4096  # only stdout's bytes are taken: stderr waits its turn at the same reader
        out.took_at = now[0]
    assert clock.stalled() == [other]


def test_stdout_and_stderr_into_one_pipe_read_slowly_lose_nothing(tmp_path):
    """``2>&1`` into one pipe the test reads a page at a time (about the stall in all): the two
    echoes share its reader's clock, so neither is given up while the other's bytes are read."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, SET_PIPE_SIZE, 4096)
    try:
        runner = subprocess.Popen(
            patched_cli("teardown", "ECHO_STALL_SECONDS", repr(STALL))
            + [
                "run",
                "--jsonl",
                str(tmp_path / "run.jsonl"),
                "--",
                "sh",
                "-c",
                f"head -c {ERR} /dev/zero; head -c {ERR} /dev/zero >&2",
            ],
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=write_end,
        )
        os.close(write_end)
        with reaped(runner):
            taken = 0
            while chunk := os.read(read_end, 4096):
                taken += len(chunk)
                time.sleep(STALL / 100)  # the slow reader: a page at a time
            assert runner.wait(timeout=SAFETY_NET) == 0
        assert taken == 2 * ERR  # every byte of both
    finally:
        os.close(read_end)


def _bench_drains(tmp_path, runs: int, stall: float, stdout: int, stderr) -> tuple[int, bytes, list[float]]:
    """``bench --runs RUNS --show-output`` of a child that fills a pipe, its stdout ``stdout``
    (closed here once handed on), the echo's stall ``stall``: its exit, its stderr (when a pipe)
    and each run's drain (from ``root_exited`` to ``runner_exit``), in order of length."""
    streams = tmp_path / "streams"
    runner = subprocess.Popen(
        patched_cli("teardown", "ECHO_STALL_SECONDS", repr(stall))
        + ["bench", "--runs", str(runs), "--show-output", "--jsonl-dir", str(streams), f"head -c {ERR} /dev/zero"],
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
    )
    os.close(stdout)
    with reaped(runner):
        _, said = runner.communicate(timeout=SAFETY_NET)
    drains = sorted(seconds_between(read_events(path), "root_exited", "runner_exit") for path in streams.iterdir())
    return runner.returncode, said or b"", drains


def test_benchs_later_runs_wait_no_more_on_a_stdout_given_up(tmp_path):
    """``bench --show-output`` into a stdout nobody reads: the first run's echo stalls once; the
    later runs' echoes into that stdout are given up at once, and one line says so."""
    read_end, write_end = os.pipe()
    try:
        code, said, drains = _bench_drains(tmp_path, 3, STALL, write_end, subprocess.PIPE)
    finally:
        os.close(read_end)
    assert code == 0, said
    lines = said.decode().splitlines()
    abandoned = "processkit-cli: warning: the consumer of the runner's stdout stopped reading; live echo abandoned"
    assert lines.count(abandoned) == 1, lines
    assert len(drains) == 3 and drains[-1] >= STALL and drains[1] < STALL, drains


EACH_RUNS_BYTE = f'head -c {ERR} /dev/zero | tr "\\000" "\\00$((HYPERFINE_ITERATION + 1))"'  # byte 1, then 2


def test_a_reader_that_reads_again_after_its_stdout_was_given_up_gets_the_later_runs_whole(tmp_path, pump_backend):
    """``bench --show-output`` into a pipe nobody reads during the first run: its echo is given up
    once. The reader then reads again before the second run (held by ``--prepare`` until the
    test has seen the warning and reads): that run's echo takes bytes, so the file is waited for
    again, and the reader gets every byte of it and the whole printout. Each run writes its own
    byte (1, then 2): the header, written before the first run, takes some of the pipe's page."""
    first, go = tmp_path / "first", tmp_path / "go"
    prepare = f'[ -e "{first}" ] || {{ touch "{first}"; exit 0; }}; until [ -e "{go}" ]; do sleep 0.01; done'
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, SET_PIPE_SIZE, 4096)
    held = bytearray()
    try:
        runner = subprocess.Popen(
            patched_cli("teardown", "ECHO_STALL_SECONDS", repr(STALL / 4))
            + ["bench", "--runs", "2", "--show-output", "--prepare", prepare, EACH_RUNS_BYTE],
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
        )
        os.close(write_end)
        with reaped(runner):
            assert runner.stderr is not None
            said = runner.stderr.readline()  # the first run's echo given up: the test's cue to read
            assert b"stopped reading; live echo abandoned" in said, said
            go.touch()
            while chunk := os.read(read_end, 65536):
                held += chunk
            said += runner.stderr.read()
            assert runner.wait(timeout=SAFETY_NET) == 0, said
    finally:
        os.close(read_end)
    assert held.count(1) <= 4096 and held.count(2) == ERR  # the first run's page at most, the second run's every byte
    assert b"were cut" not in said and b"Benchmark 1: " in held and held.endswith(b"\n"), said
