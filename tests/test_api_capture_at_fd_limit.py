"""A caller at its open-file limit whose capture is over 1 MiB (handed over as a file of the
runner service's scratch, read here by its path): the read failed (EMFILE) and the result said
stdout None, code 0, no diagnostic and no warning, the output lost unsaid. It is now said as a
capture the scratch could not hold is: the result's ``diagnostics`` and a ``CaptureWriteFailed``
warning name the stream, its size and why (CHANGELOG, svc71). The service and the caller's
later calls go on."""

from __future__ import annotations

import subprocess
import sys

from conftest import SAFETY_NET

CALLER = r"""
import os, warnings, processkit
from processkit import CaptureWriteFailed
processkit.run(["true"])
held = []
try:
    while True:
        held.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    result = processkit.run(["head", "-c", "3000000", "/dev/zero"], capture_output=True)
for fd in held:
    os.close(fd)
print(result.returncode, result.stdout is None)
print(result.diagnostics.strip())
print([type(w.message).__name__ for w in caught if issubclass(w.category, CaptureWriteFailed)])
print(len(processkit.run(["head", "-c", "3000000", "/dev/zero"], capture_output=True).stdout))
"""


def test_a_capture_the_caller_cannot_open_is_said_not_dropped(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", CALLER], cwd=tmp_path, capture_output=True, text=True, timeout=SAFETY_NET
    )
    assert done.returncode == 0, done.stderr
    code, diagnostics, warned, after = done.stdout.splitlines()
    assert code == "0 True"
    assert diagnostics == (
        "processkit: the run's stdout not returned (3000000 bytes): its file in the runner service's "
        "scratch could not be read (Too many open files)"
    )
    assert warned == "['CaptureWriteFailed']"
    assert after == "3000000"
