"""A stop signal that reaches ``run`` before its handlers are installed (while an ``--env-file``
FIFO waits for its writer: nothing is made on the host yet) ends the runner by the signal's
default, as the reference's (whose handlers are installed after the spawn) does: killed by the
signal, no event written (docs/run.md §3, docs/differences.md). SIGINT was Python's
KeyboardInterrupt there: the runner exited 107 without a word while its stream's ``runner_exit``
said 104, an internal error."""

from __future__ import annotations

import os
import signal

import pytest

from conftest import SAFETY_NET, start_cli
from fifo_ends import opened_for_writing


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_stop_before_the_runners_handlers_ends_it_by_the_signal(tmp_path, number):
    fifo, jsonl, marker = tmp_path / "env", tmp_path / "run.jsonl", tmp_path / "started"
    os.mkfifo(fifo)
    runner = start_cli(
        "run", "--jsonl", jsonl, "--env-file", fifo, "--", "touch", marker,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # not a background job's ignored SIGINT
    )  # fmt: skip
    writer = opened_for_writing(fifo, what="the runner's open of its --env-file")
    try:
        runner.send_signal(number)
        _, stderr = runner.communicate(timeout=SAFETY_NET)
    finally:
        os.close(writer)
        if runner.poll() is None:  # only after a failure: not left behind
            runner.kill()
            runner.communicate()
    assert runner.returncode == -number, stderr
    assert stderr == b""
    assert jsonl.read_bytes() == b""
    assert not marker.exists()
