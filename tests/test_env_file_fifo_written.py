"""An ``--env-file`` FIFO whose writer wrote and closed before the run read it.

A run carried alone opened the FIFO non-blocking (which lets a writer waiting in its own open go
on), then opened it again through ``/proc/self/fd/N`` to wait for a writer. That second open
waits for a *new* writer: one that wrote its lines and closed in between (``producer > FIFO &``
started first; ``printf`` is done in microseconds) left the run waiting for ever, before any
timer of the run is set, its lines unread in the pipe. Now the run waits on its one descriptor
until there is something to read or a writer came and went, then reads to the writer's close.
"""

from __future__ import annotations

import os
import subprocess

from conftest import SAFETY_NET, run_cli

SHOW = 'printf %s "$TOKEN"'


def test_a_fifo_whose_writer_has_closed_is_read(tmp_path):
    """Deterministic: the bytes wait in the FIFO's pipe (a holder keeps it open), the writer gone."""
    fifo = tmp_path / "env"
    os.mkfifo(fifo)
    holder = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.write(writer, b"TOKEN=from-the-fifo\n")
        os.close(writer)
        done = run_cli(
            "run", "--jsonl", tmp_path / "run.jsonl", "--env-file", fifo, "--", "sh", "-c", SHOW, cwd=tmp_path
        )
    finally:
        os.close(holder)
    assert (done.returncode, done.stdout) == (0, b"from-the-fifo"), done.stderr


def test_a_producer_started_first_is_read(tmp_path):
    """As a user writes it: the producer waits in its open for the run, writes once and ends."""
    fifo = tmp_path / "env"
    os.mkfifo(fifo)
    producer = subprocess.Popen(["sh", "-c", 'printf "TOKEN=produced\\n" > "$0"', str(fifo)], cwd=tmp_path)
    try:
        done = run_cli(
            "run", "--jsonl", tmp_path / "run.jsonl", "--env-file", fifo, "--", "sh", "-c", SHOW, cwd=tmp_path
        )
    finally:
        producer.kill()
        producer.wait(SAFETY_NET)
    assert (done.returncode, done.stdout) == (0, b"produced"), done.stderr
