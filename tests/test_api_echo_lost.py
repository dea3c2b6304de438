"""The API's ``echo=True`` into a stdout whose writes fail (``/dev/full``) is said to the caller: the
runner service warned into nothing (its warnings have no reader) and the caller heard not a word.
The service says it once for each echo target its runs wrote into: a later run into another
target that fails is said too (the once-only set was keyed by the stream's name, process-wide).
Each under both pumps (the native one splices into the echo)."""

from __future__ import annotations

import subprocess
import sys

from conftest import SAFETY_NET

# The caller: each run's warnings (all of them, none filtered; whether at the caller's line) and
# diagnostics, on its stderr.
CALLER = """
import os, sys, warnings
import processkit

def run(label):
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        result = processkit.run(["sh", "-c", "echo out; exit 3"], echo=True)
    for warned in said:
        print(label, "warned", warned.category.__name__, warned.filename == __file__, warned.message, file=sys.stderr)
    print(label, "code", result.returncode, file=sys.stderr)
    print(label, "diagnostics", repr(result.diagnostics), file=sys.stderr)

run("first")
for target in sys.argv[1:]:
    os.dup2(os.open(target, os.O_RDONLY if target != "/dev/full" else os.O_WRONLY), 1)
    run(target)
"""

FULL = "a write to this process's stdout failed (No space left on device); live echo abandoned"


def _caller(tmp_path, *targets: str) -> list[str]:
    script = tmp_path / "caller.py"
    script.write_text(CALLER)
    with open("/dev/full", "wb") as full:
        proc = subprocess.run(
            [sys.executable, str(script), *targets],
            stdin=subprocess.DEVNULL,
            stdout=full,
            stderr=subprocess.PIPE,
            timeout=SAFETY_NET,
        )
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stderr.decode().splitlines()


def test_an_echo_into_a_full_stdout_is_said_to_the_caller(tmp_path, pump_backend):
    lines = _caller(tmp_path)
    assert lines == [
        f"first warned EchoLost True processkit.run('sh', ...): {FULL}",
        "first code 3",
        "first diagnostics " + repr(f"processkit: warning: {FULL}\n"),
    ]


def test_a_later_run_echoing_into_another_failing_target_is_said_too(tmp_path, pump_backend):
    """The second run's stdout is a file opened read-only (its writes fail, EBADF): another target,
    said; the third's is /dev/full again, said at the first run already."""
    read_only = tmp_path / "read-only"
    read_only.write_bytes(b"")
    lines = _caller(tmp_path, str(read_only), "/dev/full")
    warned = [line for line in lines if " warned " in line]
    assert warned == [
        f"first warned EchoLost True processkit.run('sh', ...): {FULL}",
        f"{read_only} warned EchoLost True processkit.run('sh', ...): a write to this process's stdout failed "
        "(Bad file descriptor); live echo abandoned",
    ]
    assert "/dev/full diagnostics ''" in lines
    assert [line for line in lines if " code " in line] == ["first code 3", f"{read_only} code 3", "/dev/full code 3"]
