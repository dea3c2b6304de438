"""A run whose child exits while processes of its tree still run (a ``setsid`` daemon, a
background job): the teardown ends them at once, so what they would have written next is lost.
The CLI's ``run`` warns of it and ``batch`` marks the job LEAK; the API said nothing (an empty
``diagnostics``, no warning). It now says it as it says the run's other losses: the CLI's words
in ``diagnostics`` and a ``processkit.LeftRunning`` warning at the caller's line, holding the
result (raised as an error, ``-W error``, the run is not lost). Through the real service, in a
caller of its own."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import SAFETY_NET

SCRIPT = """
import json, sys, warnings
import processkit

left = ["sh", "-c", "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo hi"]
got = {}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    result = processkit.run(left, capture_output=True)
    handle = processkit.start(left)
    handle.wait()
    clean = processkit.run(["sh", "-c", "echo hi"], capture_output=True)
got["said"] = [(w.category.__name__, str(w.message), w.filename == __file__) for w in caught]
got["diagnostics"] = [result.diagnostics, clean.diagnostics]
try:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        processkit.run(left, capture_output=True)
except processkit.LeftRunning as said:
    got["raised"] = [said.result.returncode, said.result.stdout.decode()]
print(json.dumps(got))
"""

WORDS = (
    "the child exited with 1 process of its tree still running when the teardown began, which ends it at once"
    " (a run ends when its child has exited and its output pipes are closed, or 5s after the exit;"
    " what it would have written next is lost)"
)


def test_the_api_says_what_the_child_s_exit_left_running(tmp_path):
    script = tmp_path / "caller.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=SAFETY_NET
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.splitlines()[-1])
    assert got["diagnostics"] == [f"processkit: warning: {WORDS}\n", ""], got
    assert got["said"] == [
        ["LeftRunning", f"processkit.run('sh', ...): {WORDS}", True],
        ["LeftRunning", f"processkit.start('sh', ...): {WORDS}", True],
    ], got
    assert got["raised"] == [0, "hi\n"], got
