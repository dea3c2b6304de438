"""A template's arguments from a pipe are taken as they come (issue 48): the first job starts
while its producer still writes, the batch's loop goes on meeting its jobs' deadlines while the
pipe is silent, the values stay byte-exact (not UTF-8, spaces, quotes), and a long pipe is
expanded in memory that does not grow with it.

The test is the producer: the batch's stdin is a pipe it holds open, and it learns that a job
ran from a FIFO the job writes to (a read with a deadline, no sleep).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import select
import subprocess
import tracemalloc

from conftest import run_cli, start_cli
from streams import PY

CANCELLED = 107

# The child writes its argument (as the OS's bytes) into $ARGV_DIR/<the bytes' hex>; the
# argument "first" also writes to the FIFO $SIGNAL, which the test reads.
RECORD = (
    "import os,sys\n"
    "arg=os.fsencode(sys.argv[1])\n"
    "open(os.path.join(os.environ['ARGV_DIR'], arg.hex() or 'empty'),'wb').write(arg)\n"
    "if arg == b'first': open(os.environ['SIGNAL'],'w').write('ran')\n"
)


@contextlib.contextmanager
def _ended(batch: subprocess.Popen):
    """The batch, killed if the test left it running; its stdin closed."""
    try:
        yield batch
    finally:
        if batch.poll() is None:
            batch.kill()
            batch.wait()
        if not batch.stdin.closed:
            batch.stdin.close()


def _signalled(path, seconds: float) -> bool:
    """Whether something was written to the FIFO at ``path`` within ``seconds``."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(seconds * 1000)) and os.read(fd, 16) == b"ran"
    finally:
        os.close(fd)


def test_the_first_job_runs_before_the_pipe_ends_and_values_stay_byte_exact(tmp_path):
    record, fifo = tmp_path / "argv", tmp_path / "signal"
    record.mkdir()
    os.mkfifo(fifo)
    env = {**os.environ, "ARGV_DIR": str(record), "SIGNAL": str(fifo)}
    batch = start_cli(
        "batch", "--out", tmp_path / "out", "--jobs", "2", "--", PY, "-c", RECORD, "{}", stdin=subprocess.PIPE, env=env
    )
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # held, so the job's open for writing never waits
    with _ended(batch):
        batch.stdin.write(b"first\n")
        batch.stdin.flush()
        assert _signalled(fifo, 30), "the first job did not run while its producer held the pipe open"
        later = [b"\xff\xfe raw", b"two words", b"'single' \"double\" $(touch pwned)", b"tab\there"]
        batch.stdin.write(b"".join(value + b"\n" for value in later))
        batch.stdin.close()
        assert batch.wait(60) == 0, batch.stderr.read()
    os.close(reader)
    found = {bytes.fromhex(name): (record / name).read_bytes() for name in os.listdir(record)}
    assert found == {value: value for value in [b"first", *later]}
    assert not (tmp_path / "pwned").exists()
    assert "5 of 5 jobs exited 0" in batch.stderr.read().decode()


def test_jobs_deadlines_are_met_while_the_pipe_is_silent(tmp_path):
    """A job's --timeout ends it while the batch waits for the pipe's next line: the loop was
    never held by a read (the summary has the job's line before the pipe ends)."""
    summary = tmp_path / "out" / "summary.jsonl"
    batch = start_cli(
        "batch",
        "--out",
        tmp_path / "out",
        "--timeout",
        "1s",
        "--",
        PY,
        "-c",
        "import sys,time; time.sleep(float(sys.argv[1]))",
        "{}",
        stdin=subprocess.PIPE,
    )
    with _ended(batch):
        batch.stdin.write(b"60\n")
        batch.stdin.flush()
        lines: list[dict] = []
        for _ in range(300):  # the job's 1 s timeout, then its line: a deadline of 30 s in all
            if batch.poll() is not None:
                break
            if summary.exists() and summary.read_text().endswith("\n"):
                lines = [json.loads(line) for line in summary.read_text().splitlines()]
                break
            select.select([], [], [], 0.1)
        assert [(line["id"], line["source"]) for line in lines] == [("60", "timeout")], batch.poll()
        batch.stdin.write(b"0\n")
        batch.stdin.close()
        assert batch.wait(60) == 117  # one job timed out: the batch failed
    assert [json.loads(line)["id"] for line in summary.read_text().splitlines()] == ["60", "0"]


def test_a_long_pipe_is_expanded_in_memory_that_does_not_grow_with_it():
    """The jobs made from a pipe as they come: what is held after 3,000 of them is what was
    held after 500 (a list of them held ~1 KB a job)."""
    from processkit.batching.piped import Awaited, wait_for
    from processkit.batching.template import expand, split
    from processkit.batching.template_flags import Streamed

    producer = subprocess.Popen(["seq", "1", "3000"], stdout=subprocess.PIPE)
    gc.collect()
    tracemalloc.start(1)
    try:
        template = split(["true", "{}"])
        jobs = Streamed(expand(template, {"timeout": "1h"}, producer.stdout, as_they_come=True), template)
        held, count = [], 0
        for job in jobs:
            if isinstance(job, Awaited):
                wait_for(job.fd)
                continue
            count += 1
            if count in (500, 3000):
                gc.collect()
                held.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
        producer.wait()
    assert count == 3000 and len(jobs) == 3000 and jobs.complete
    grown = held[1] - held[0]
    assert grown < 2500 * 16, f"{grown} bytes more for 2,500 more jobs: {grown / 2500:.0f} a job kept"


def _started_batch(tmp_path, *flags):
    """A batch of ``PY -c 'exit(int(arg))'`` jobs whose stdin is a pipe the test holds open."""
    return start_cli(
        "batch",
        "--out",
        tmp_path / "out",
        *flags,
        "--",
        PY,
        "-c",
        "import sys; sys.exit(int(sys.argv[1]))",
        "{}",
        stdin=subprocess.PIPE,
    )


def test_the_halt_ends_the_batch_while_the_pipe_is_still_open(tmp_path):
    """--halt-on-failure: the batch ends after the failed job, with its producer still writing
    nothing (the rest of the pipe is never read). Its closing line said neither the halt (no job
    was left read and unstarted) nor the input left unread: ``0 of 1 job exited 0, 1 failed``
    reads as a batch of one job that ran to its end."""
    batch = _started_batch(tmp_path, "--halt-on-failure")
    with _ended(batch):
        batch.stdin.write(b"3\n")
        batch.stdin.flush()
        code = batch.wait(60)
    assert code == 117, batch.stderr.read()
    lines = [json.loads(line) for line in (tmp_path / "out" / "summary.jsonl").read_text().splitlines()]
    assert [(line["id"], line["exit_code"]) for line in lines] == [("3", 3)]
    said = "batch: 0 of 1 job exited 0, 1 failed, halted by --halt-on-failure, its input not read to its end"
    assert batch.stderr.read().decode().splitlines()[-1] == said


def test_a_stop_signal_ends_the_batch_waiting_on_its_pipe(tmp_path):
    """SIGTERM while the pipe is silent: the batch's own stop (cancelled, 107),
    not a death by the signal in a read; its closing line says the input was left unread (the
    jobs it counts are those its pipe gave so far)."""
    summary = tmp_path / "out" / "summary.jsonl"
    batch = _started_batch(tmp_path)
    with _ended(batch):
        batch.stdin.write(b"0\n")
        batch.stdin.flush()
        for _ in range(300):  # the first job's line: a deadline of 30 s
            if summary.exists() and summary.read_text().endswith("\n"):
                break
            select.select([], [], [], 0.1)
        batch.terminate()
        code = batch.wait(60)
    assert code == CANCELLED, batch.stderr.read()
    said = "batch: 1 of 1 job exited 0, cancelled by SIGTERM, its input not read to its end"
    assert batch.stderr.read().decode().splitlines()[-1] == said


def test_a_pipe_read_to_its_end_then_halted_is_not_said_unread(tmp_path):
    """Its producer had closed, the pipe empty, and the halt came before the batch read the end
    (one job at a time): the closing line said ``its input not read to its end``, which ``-j 2``
    or a file never says. A line left in the pipe is still said."""
    for given, said in (
        (b"3\n", "batch: 0 of 1 job exited 0, 1 failed"),
        (b"3\n4\n", "batch: 0 of 1 job exited 0, 1 failed, halted by --halt-on-failure, its input not read to its end"),
    ):
        read, write = os.pipe()
        os.write(write, given)
        os.close(write)  # the producer gone before the batch starts
        with os.fdopen(read, "rb") as stdin:
            proc = run_cli(
                "batch", "--out", tmp_path / given.hex(), "-j", "1", "--halt-on-failure",
                "--", PY, "-c", "import sys; sys.exit(int(sys.argv[1]))", "{}", stdin=stdin,
            )  # fmt: skip
        assert proc.returncode == 117, proc.stderr
        assert proc.stderr.decode().splitlines()[-1] == said, proc.stderr
