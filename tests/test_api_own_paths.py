"""Paths that name the calling process itself (``/dev/stdin``, ``/dev/stderr``, ``/dev/fd/N``,
``/proc/self/...``) reach the caller's own descriptors through its runner service, as the CLI's
``--stdin-file /dev/stdin`` and ``--jsonl /dev/stderr`` reach its caller's: the service opens
them, and without the caller's pid they named the service's (its /dev/null: the child read
nothing, the events were lost, no error said so)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

import pytest

SCRIPT = r"""
import os, processkit
reader, writer = os.pipe()
os.write(writer, b"through a descriptor\n")
os.close(writer)
print(processkit.run(["cat"], stdin_file="/dev/stdin", capture_output=True).stdout.decode().strip())
print(processkit.run(["cat"], stdin_file=f"/dev/fd/{reader}", capture_output=True).stdout.decode().strip())
print(processkit.run(["pwd"], cwd="/proc/self/cwd", capture_output=True).stdout.decode().strip())
reader, writer = os.pipe()
os.write(writer, b"through the thread's entry\n")
os.close(writer)
print(processkit.run(["cat"], stdin_file=f"/proc/thread-self/fd/{reader}", capture_output=True).stdout.decode().strip())
done = processkit.run(["true"], jsonl="/dev/stderr")
print(done.returncode, done.jsonl)  # the result names the stream as the caller did
"""


def as_caller(tmp_path, script: str, *args: str, given: bytes = b"the caller's stdin\n") -> subprocess.CompletedProcess:
    """``script`` run by a Python in ``tmp_path`` whose stdin is a file holding ``given``."""
    (tmp_path / "input.txt").write_bytes(given)
    with open(tmp_path / "input.txt", "rb") as stdin:
        return subprocess.run(
            [sys.executable, "-c", script, *args], stdin=stdin, capture_output=True, text=True, cwd=tmp_path,
            timeout=120,
        )  # fmt: skip


def test_paths_naming_the_caller_reach_its_own_descriptors(tmp_path):
    done = as_caller(tmp_path, SCRIPT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "the caller's stdin",
        "through a descriptor",
        str(tmp_path),
        "through the thread's entry",
        "0 /dev/stderr",
    ]
    assert '"event":"runner_exit"' in done.stderr, done.stderr


CLOSED = r"""
import os, processkit
closed = os.open(os.devnull, os.O_RDONLY)
os.close(closed)
for options in ({"stdin_file": f"/dev/fd/{closed}"}, {"env_file": [f"/proc/self/fd/{closed}"]}):
    done = processkit.run(["cat"], capture_output=True, **options)
    print(done.returncode, closed, done.message)
"""


def test_a_failure_names_the_path_as_the_caller_gave_it(tmp_path):
    """The service is sent ``/proc/<caller>/fd/N``; the words name ``/dev/fd/N``, as the CLI's."""
    done = subprocess.run([sys.executable, "-c", CLOSED], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    (code, fd, stdin), (code2, _, env) = (line.split(" ", 2) for line in done.stdout.splitlines())
    assert (code, code2) == ("111", "111"), done.stdout
    assert stdin.startswith(f"could not open stdin file `/dev/fd/{fd}`:"), stdin
    assert env.startswith(f"could not read environment file `/proc/self/fd/{fd}`:"), env


LINKED = r"""
import os, sys, processkit
where = sys.argv[1]
os.symlink("/dev/stdin", f"{where}/input")
os.symlink("/dev/stderr", f"{where}/events")
os.symlink("/dev/shm", "shared")
print(processkit.run(["cat"], stdin_file=f"{where}/input", capture_output=True).stdout.decode().strip())
print(processkit.run(["sh", "-c", "echo $KEY"], env_file=[f"{where}/input"], capture_output=True).stdout.decode().strip())
print(processkit.run(["true"], jsonl=f"{where}/events").jsonl)
print(processkit.run(["true"], cwd="shared").events[0].cwd)  # run_started's
"""


@pytest.mark.parametrize("under", ["the working directory", "/dev/shm"])
def test_a_link_to_a_path_naming_the_caller_reaches_it_too(tmp_path, under):
    """A link to ``/dev/stdin`` (``/dev/stderr``) was sent as it was, and the service, opening it,
    reached its own /dev/null: the child got no input, no variable, exit 0, and the events were
    lost; so was one under ``/dev/`` (``/dev/shm``) after the names were followed. A link to any
    other path keeps the caller's name."""
    if under == "/dev/shm" and not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm")
    where = tempfile.mkdtemp(dir="/dev/shm") if under == "/dev/shm" else str(tmp_path)
    try:
        done = as_caller(tmp_path, LINKED, where, given=b"KEY=the caller's stdin\n")
    finally:
        if where != str(tmp_path):
            shutil.rmtree(where)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "KEY=the caller's stdin",
        "the caller's stdin",
        f"{where}/events",
        str(tmp_path / "shared"),
    ]
    assert '"event":"runner_exit"' in done.stderr, done.stderr
