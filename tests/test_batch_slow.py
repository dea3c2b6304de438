"""nextest's ``SLOW [> 60.000s] name``: a job that runs on past each ``--slow-after`` period (60 s
by default, nextest's slow-timeout) is said on stderr once per period, so a CI log, which draws no
progress bar, says what runs long while it runs. Synchronised on the batch's own lines: the job
waits until the test, having read its SLOW line, releases it."""

from __future__ import annotations

import os
import re
import select
import time

from conftest import SAFETY_NET, UNTIL_RELEASED, reaped, run_cli, start_cli
from streams import PY

SLOW = re.compile(rb"batch: SLOW \[> (\d+\.\d{3})s\] held\n")


def test_a_job_running_past_its_period_is_said_slow_while_it_runs(tmp_path):
    release = tmp_path / "release"
    proc = start_cli(
        "batch", "--out", tmp_path / "out", "--slow-after", "100ms", "--id", "held",
        "--", PY, "-c", UNTIL_RELEASED, release, ":::", "a", cwd=tmp_path,
    )  # fmt: skip
    with reaped(proc):
        said = _stderr_until(proc, SLOW)  # said while the job still waits for its release
        release.write_bytes(b"")
        _, rest = proc.communicate(timeout=SAFETY_NET)
    assert proc.returncode == 0, rest
    lines = [line + b"\n" for line in (said + rest).splitlines()]
    figures = [float(match.group(1)) for match in map(SLOW.fullmatch, lines) if match]
    assert figures == sorted(set(figures)) and figures[0] >= 0.1, lines  # once per period, each past it
    assert lines[len(figures)].startswith(b"batch: held: exit 0 in "), lines  # the job's own line after


def _stderr_until(proc, line: re.Pattern) -> bytes:
    """``proc``'s stderr from its first line to the first that is ``line``; its end or
    ``SAFETY_NET`` seconds without that line fail the test (the job's own deadline is the same)."""
    said, end, fd = b"", time.monotonic() + SAFETY_NET, proc.stderr.fileno()
    while not any(map(line.fullmatch, said.splitlines(keepends=True))):
        assert select.select([fd], [], [], max(0, end - time.monotonic()))[0], said  # in time
        more = os.read(fd, 65536)
        assert more, said  # before the batch ended
        said += more
    return said


def test_a_job_waiting_out_its_retry_delay_is_not_said_slow(tmp_path):
    # The pause outlasts a second, so the once-a-second check sees the job in it, long past the
    # period; the retry itself, `false`, ends well within one.
    result = run_cli(
        "batch", "--out", tmp_path / "out", "--retries", "1", "--retry-delay", "1500ms", "--slow-after", "500ms",
        "--id", "held", "--", "false", ":::", "a", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 117, result.stderr  # a job failed
    assert b"SLOW" not in result.stderr, result.stderr  # an attempt counts from its own start
    assert b"batch: held: exit 1 in " in result.stderr and b", 2 attempts" in result.stderr, result.stderr


def test_a_bad_slow_after_is_refused_before_anything_runs(tmp_path):
    result = run_cli(
        "batch", "--out", tmp_path / "out", "--slow-after", "soon", "--", "touch", tmp_path / "ran", ":::", "a"
    )
    assert result.returncode == 100, result.stderr
    assert result.stderr.startswith(b"processkit-cli: invalid value 'soon' for '--slow-after <DUR>'"), result.stderr
    assert not (tmp_path / "ran").exists() and not (tmp_path / "out").exists()


def test_slow_after_with_a_dask_scheduler_is_refused_not_ignored(tmp_path):
    """The SLOW lines are the local batch's (the client does not see when a job starts on a
    worker): ``--slow-after 5s --dask-scheduler ADDRESS`` ran with no line ever said, the flag
    dropped without a word. Refused before the scheduler is reached or anything runs."""
    unreachable = "tcp://127.0.0.1:1"  # refused before any connection is tried
    result = run_cli(
        "batch", "--out", tmp_path / "out", "--slow-after", "5s", "--dask-scheduler", unreachable,
        "--", "touch", tmp_path / "ran", ":::", "a",
    )  # fmt: skip
    assert result.returncode == 100, result.stderr
    assert result.stderr == (
        b"processkit-cli: --slow-after watches the jobs running on this machine: with --dask-scheduler no SLOW "
        b"line is said (the client does not see when a job starts on a worker; --slow-after 0 asks for none)\n"
    )
    assert not (tmp_path / "ran").exists() and not (tmp_path / "out").exists()
