"""The API's ``echo=True`` into a stdout whose writes fail (``/dev/full``) is said to the caller: the
runner service warned into nothing (its warnings have no reader) and the caller heard not a word.
Every run's lost echo is said in its own reply (its ``EchoLost`` at the caller's line, its
``diagnostics``), whatever an earlier run into the same target said: the service's once-only set
left a later run's result empty. stdout and stderr on one failing target are each said (the set
was keyed by the target alone: stderr's was dropped). Each under both pumps (the native one
splices into the echo)."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import SAFETY_NET

# The caller: each run's warnings (all of them, none filtered; whether at the caller's line) and
# diagnostics, in the file REPORT names (its stderr takes the echo; a target ``both:PATH`` is its
# stdout and stderr; ``opath:PATH`` its stdout opened ``O_PATH``).
CALLER = """
import os, sys, warnings
import processkit

report = open(os.environ["REPORT"], "w", buffering=1)

def run(label):
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        result = processkit.run(["sh", "-c", "echo out; echo err >&2; exit 3"], echo=True)
    for warned in said:
        print(label, "warned", warned.category.__name__, warned.filename == __file__, warned.message, file=report)
    print(label, "code", result.returncode, file=report)
    print(label, "diagnostics", repr(result.diagnostics), file=report)

run("first")
for target in sys.argv[1:]:
    path = target.removeprefix("both:").removeprefix("opath:")
    fd = os.open(path, os.O_PATH if target.startswith("opath:") else os.O_RDONLY if path != "/dev/full" else os.O_WRONLY)
    for into in (1, 2) if target.startswith("both:") else (1,):
        os.dup2(fd, into)
    run(target)
"""

FULL = "a write to this process's stdout failed (No space left on device); live echo abandoned"


def _caller(tmp_path, *targets: str) -> list[str]:
    script = tmp_path / "caller.py"
    script.write_text(CALLER)
    report = tmp_path / "report"
    with open("/dev/full", "wb") as full:
        proc = subprocess.run(
            [sys.executable, str(script), *targets],
            stdin=subprocess.DEVNULL,
            stdout=full,
            stderr=subprocess.PIPE,
            env={**os.environ, "REPORT": str(report)},
            timeout=SAFETY_NET,
        )
    assert proc.returncode == 0, proc.stderr.decode()
    return report.read_text().splitlines()


def test_an_echo_into_a_full_stdout_is_said_to_the_caller(tmp_path, pump_backend):
    lines = _caller(tmp_path)
    assert lines == [
        f"first warned EchoLost True processkit.run('sh', ...): {FULL}",
        "first code 3",
        "first diagnostics " + repr(f"processkit: warning: {FULL}\n"),
    ]


def test_a_later_run_echoing_into_a_failing_target_is_said_each_time(tmp_path, pump_backend):
    """The second run's stdout is a file opened read-only (its writes fail, EBADF): another target;
    the third's is /dev/full again, said at the first run already, said to this run too."""
    read_only = tmp_path / "read-only"
    read_only.write_bytes(b"")
    lines = _caller(tmp_path, str(read_only), "/dev/full")
    bad = "a write to this process's stdout failed (Bad file descriptor); live echo abandoned"
    assert [line for line in lines if " warned " in line] == [
        f"first warned EchoLost True processkit.run('sh', ...): {FULL}",
        f"{read_only} warned EchoLost True processkit.run('sh', ...): {bad}",
        f"/dev/full warned EchoLost True processkit.run('sh', ...): {FULL}",
    ]
    assert "/dev/full diagnostics " + repr(f"processkit: warning: {FULL}\n") in lines
    assert [line for line in lines if " code " in line] == ["first code 3", f"{read_only} code 3", "/dev/full code 3"]


def test_stdout_and_stderr_on_one_failing_target_are_both_said(tmp_path, pump_backend):
    """``> /dev/full 2>&1``: one target, two streams, each said (stderr's was dropped)."""
    lines = _caller(tmp_path, "both:/dev/full")
    full_err = FULL.replace("stdout", "stderr")
    assert [line for line in lines if line.startswith("both:")] == [
        f"both:/dev/full warned EchoLost True processkit.run('sh', ...): {FULL}",
        f"both:/dev/full warned EchoLost True processkit.run('sh', ...): {full_err}",
        "both:/dev/full code 3",
        "both:/dev/full diagnostics " + repr(f"processkit: warning: {FULL}\nprocesskit: warning: {full_err}\n"),
    ]


def test_an_echo_into_a_stdout_no_poll_can_watch_is_said_under_both_pumps(tmp_path, pump_backend):
    """A stdout that is a directory opened read-only (no private description to be had, and no
    epoll set takes it): the Python pump's write failed (EBADF) and said so, the native pump queued
    the bytes for a watch the loop could not make, and the echo was lost with not a word."""
    directory = tmp_path / "a-directory"
    directory.mkdir()
    lines = _caller(tmp_path, str(directory))
    bad = "a write to this process's stdout failed (Bad file descriptor); live echo abandoned"
    assert f"{directory} warned EchoLost True processkit.run('sh', ...): {bad}" in lines, lines
    assert f"{directory} code 3" in lines


def test_an_echo_into_an_o_path_stdout_is_said_under_both_pumps(tmp_path, pump_backend):
    """A stdout that is an ``O_PATH`` descriptor of a directory: as the read-only directory above."""
    directory = tmp_path / "a-directory"
    directory.mkdir()
    lines = _caller(tmp_path, f"opath:{directory}")
    bad = "a write to this process's stdout failed (Bad file descriptor); live echo abandoned"
    assert f"opath:{directory} warned EchoLost True processkit.run('sh', ...): {bad}" in lines, lines
    assert f"opath:{directory} code 3" in lines
