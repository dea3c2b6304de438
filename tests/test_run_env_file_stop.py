"""A stop while ``run --env-file FIFO`` waits for the FIFO's writer: Ctrl-C ended the run with
107 and not a word, SIGTERM and SIGHUP killed the runner by the signal (143, 129), and each left
an empty ``--jsonl`` with no ``runner_exit``. The wait now takes a stop as the run's own
(docs/run.md, "Setup"): 107, ``run cancelled (SIGTERM): the child was not started``, and
``runner_exit{source:"cancelled"}``. Process-level: the real CLI and a real FIFO no one writes;
synchronised on the runner holding the FIFO open (its ``/proc`` descriptors), where it waits."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from conftest import SAFETY_NET, start_cli

CANCELLED = 107


def _holds(pid: int, path: str) -> bool:
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return False
    for name in names:
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}") == path:
                return True
        except OSError:
            continue
    return False


@pytest.mark.parametrize(
    "sent, words",
    [(signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM"), (signal.SIGHUP, "SIGHUP")],
)
def test_a_stop_while_an_env_file_fifo_is_awaited_is_the_runs_stop(tmp_path, sent, words):
    fifo, jsonl = str(tmp_path / "env.fifo"), tmp_path / "run.jsonl"
    os.mkfifo(fifo)
    run = start_cli("run", "--jsonl", jsonl, "--env-file", fifo, "--", "true")
    try:
        deadline = time.monotonic() + SAFETY_NET
        while not _holds(run.pid, fifo):
            assert run.poll() is None and time.monotonic() < deadline, "the runner never opened its env file"
            time.sleep(0.01)
        run.send_signal(sent)
        _, err = run.communicate(timeout=SAFETY_NET)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == CANCELLED, err
    assert err.decode() == f"processkit-cli: run cancelled ({words}): the child was not started\n"
    last = json.loads(jsonl.read_text().splitlines()[-1])
    assert (last["event"], last["code"], last["source"]) == ("runner_exit", CANCELLED, "cancelled")
