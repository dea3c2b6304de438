"""A stop signal to ``processkit.batch``'s batch process while its ``out`` is set up (a
``resume`` summary read: seconds for a large one), before it watches the signals: the caller's
RuntimeError says the batch's stop before any job, as the CLI's closing line does, where it once
said only ``the batch failed: Stopped: sigterm`` (a class name, no code). A caller of its own
with a ``sitecustomize`` that holds the summary's read, marking it with the reading process's pid."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from conftest import SAFETY_NET, wait_for_file

# Loaded by every process of the caller's: only the batch process reads a ``resume`` summary.
HOOK = """
import importlib, os, time
recorder = importlib.import_module("processkit.batching.recorder")
read = recorder.finished_jobs
def held(path):
    with open(os.environ["HOLD_MARK"] + ".tmp", "w") as mark:
        mark.write(str(os.getpid()))
    os.rename(os.environ["HOLD_MARK"] + ".tmp", os.environ["HOLD_MARK"])
    time.sleep(600)
    return read(path)
recorder.finished_jobs = held
"""

CALLER = """
import sys, processkit
out = sys.argv[1]
processkit.batch([{"args": ["true"], "id": "a"}], out=out)
open(sys.argv[2], "w").close()
try:
    processkit.batch([{"args": ["true"], "id": "a"}], out=out, resume=True)
except RuntimeError as exc:
    print(exc)
"""


def test_a_stop_while_the_api_batch_reads_its_summary_is_said_as_the_batchs_stop(tmp_path):
    hook, mark, ready = tmp_path / "hook", tmp_path / "reading", tmp_path / "first"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hook), *sys.path]), "HOLD_MARK": str(mark)}
    caller = subprocess.Popen(
        [sys.executable, "-c", CALLER, str(tmp_path / "out"), str(ready)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path,
    )  # fmt: skip
    try:
        wait_for_file(mark)
        os.kill(int(mark.read_text()), signal.SIGTERM)
        out, err = caller.communicate(timeout=SAFETY_NET)
    finally:
        caller.kill()
    assert ready.exists(), err.decode()  # the first batch read no summary
    assert out.decode() == (
        "the batch could not run: no job started, cancelled by SIGTERM (its --out being set up)\n"
    ), err.decode()
