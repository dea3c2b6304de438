"""A warning the API gives once a call's work is done, raised as an error (``python -W error``,
pytest's ``filterwarnings = error``), carries what the call returns: the finished run's result
(``run``, ``run_async``) and the batch's summary lines (``batch``) are on its ``result``, where
before the raise was the only way out of the call and the result was lost with it. Each in a
caller of its own under ``-W error``, through the real service."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import SAFETY_NET

SCRIPT = """
import asyncio, json, sys
import processkit

here = sys.argv[1]
got = {}
cut = ["sh", "-c", "printf 0123456789abcdef; exit 3"]
try:
    processkit.run(cut, capture_dir=here, capture_max_bytes=10)
except processkit.CaptureTruncated as said:
    got["run"] = [said.result.returncode, said.result.stdout_capture.bytes_written, str(said)]
try:
    asyncio.run(processkit.run_async(cut, capture_dir=here, capture_max_bytes=10))
except processkit.CaptureTruncated as said:
    got["run_async"] = [said.result.returncode, said.result.stdout_capture.bytes_written]
processkit.batch([{"args": ["true"], "id": "old"}], out=here + "/out")
try:
    processkit.batch([{"args": ["true"], "id": "new"}, {"args": ["false"], "id": "bad"}], out=here + "/out")
except processkit.BatchWarning as said:
    got["batch"] = sorted((line["id"], line["exit_code"]) for line in said.result)
print(json.dumps(got))
"""


def test_a_warning_raised_as_an_error_holds_the_call_s_result(tmp_path):
    argv = [sys.executable, "-W", "error", "-c", SCRIPT, str(tmp_path)]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=SAFETY_NET)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.splitlines()[-1])
    assert got["run"][:2] == [3, 10] and "holds 10 of its 16 bytes" in got["run"][2], got
    assert got["run_async"] == [3, 10], got
    assert got["batch"] == [["bad", 1], ["new", 0]], got


def test_the_batch_s_warning_and_error_load_no_api_package(tmp_path):
    """``BatchWarning`` shares the run warnings' base (``processkit.callwarning``), not their package:
    naming it, or ``BatchError``, loads the batch's caller alone, as it did before it held a result."""
    probe = "import sys, processkit; processkit.BatchWarning, processkit.BatchError; print(sorted(m for m in sys.modules if m.startswith('processkit.api')))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, timeout=SAFETY_NET
    )
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stderr
