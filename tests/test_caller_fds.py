"""A child keeps the descriptors beyond 0-2 the runner's caller passed it, and none of the
runner's own (processkit/caller_fds.py), as the reference's (Rust's ``Command`` closes nothing).

What it is for: a build farm's recipe ``+processkit-cli run -- $(MAKE) -C sub``, whose sub-make
must find GNU make's jobserver pipe (``--jobserver-auth=R,W`` in ``MAKEFLAGS``) or run with -j1
("jobserver unavailable"). Each child here writes the map of its own descriptors (fd to what
/proc says it is) into a file: any fd but 0-2 and the caller's one is the runner's, leaked.
The API's runner service passes none: its child gets neither the service's descriptors nor its
caller's."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import processkit
from conftest import cli_command

FD_MAP = (
    "import json, os, sys\n"
    "fds = {}\n"
    "for name in os.listdir('/proc/self/fd'):\n"
    "    try:\n"
    "        fds[name] = os.readlink('/proc/self/fd/' + name)\n"
    "    except OSError:\n"
    "        pass  # the listing's own, closed already\n"
    "with open(sys.argv[1], 'w') as out:\n"
    "    json.dump(fds, out)\n"
)


def _run_with_passed(tmp_path, *args: str) -> tuple[dict[str, str], subprocess.CompletedProcess]:
    """``processkit-cli ARGS`` started by a shell's ``exec 3<A 9<B`` (the lowest fd a caller can
    pass, and one above the runner's own first ones): what the child must hold beyond 0-2, fd to
    file, and the runner's outcome."""
    passed = {"3": str(tmp_path / "three"), "9": str(tmp_path / "nine")}
    for path in passed.values():
        pathlib.Path(path).write_text("")
    shell = 'exec "$@" 3<"$A" 9<"$B"'
    done = subprocess.run(
        ["sh", "-c", shell, "sh", *cli_command(), *args],
        env={**os.environ, "A": passed["3"], "B": passed["9"]},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
        cwd=tmp_path,
    )
    return passed, done


def _child_fds(path) -> dict[str, str]:
    with open(path) as f:
        return json.load(f)


def test_run_child_keeps_the_callers_fds_and_none_of_the_runners(tmp_path, spawn_backend):
    script, out = tmp_path / "fds.py", tmp_path / "fds.json"
    script.write_text(FD_MAP)
    jsonl, capture = tmp_path / "run.jsonl", tmp_path / "capture"
    passed, done = _run_with_passed(
        tmp_path,
        "run",
        "--jsonl",
        str(jsonl),
        "--capture-dir",
        str(capture),
        "--",
        sys.executable,
        str(script),
        str(out),
    )
    assert done.returncode == 0, done.stderr
    _holds_only(_child_fds(out), passed)  # the jsonl, captures, control socket, pidfd, groups: none


def _holds_only(fds: dict[str, str], passed: dict[str, str]) -> None:
    assert sorted(fds, key=int) == ["0", "1", "2", *passed], fds
    assert {fd: fds[fd] for fd in passed} == passed


def test_batch_and_bench_children_keep_the_callers_fds(tmp_path):
    """As GNU parallel's and hyperfine's children do; a batch's held jobs (``--keep failed``)
    are spawned from another context than its kept ones, so both are looked at."""
    script = tmp_path / "fds.py"
    script.write_text(FD_MAP)
    for keep in ("all", "failed"):
        out = tmp_path / f"batch-{keep}.json"
        passed, done = _run_with_passed(
            tmp_path,
            "batch",
            "--keep",
            keep,
            "--out",
            str(tmp_path / f"out-{keep}"),
            "--",
            sys.executable,
            str(script),
            "{}",
            ":::",
            out.name,
        )
        assert done.returncode == 0, done.stderr
        _holds_only(_child_fds(out), passed)
    command = json.dumps([sys.executable, str(script), str(tmp_path / "bench.json")])
    passed, done = _run_with_passed(tmp_path, "bench", "--runs", "1", "--warmup", "0", "--command", command)
    assert done.returncode == 0, done.stderr
    _holds_only(_child_fds(tmp_path / "bench.json"), passed)


def test_a_detached_run_passes_none(tmp_path):
    """A detached run outlives its caller: it holds none of the caller's descriptors (a pipe the
    caller reads to its end, a make's jobserver), where the reference's copy keeps them
    (docs/differences.md)."""
    script, out = tmp_path / "fds.py", tmp_path / "detached.json"
    script.write_text(FD_MAP)
    jsonl = tmp_path / "run.jsonl"
    passed, done = _run_with_passed(
        tmp_path,
        "run",
        "--detach",
        "--run-id",
        "fds-detached",
        "--jsonl",
        str(jsonl),
        "--",
        sys.executable,
        str(script),
        str(out),
    )
    assert done.returncode == 0, done.stderr
    waited = subprocess.run(
        cli_command() + ["wait", "--run-id", "fds-detached", "--timeout", "60s", "--report-outcome"],
        capture_output=True,
        timeout=120,
    )
    assert waited.returncode == 0 and json.loads(waited.stdout)["child_code"] == 0, waited
    assert sorted(_child_fds(out), key=int) == ["0", "1", "2"], _child_fds(out)


def test_api_child_gets_no_fd_of_its_caller_or_the_service(tmp_path):
    """The API is ``subprocess``-shaped (``close_fds=True``): its caller's inheritable
    descriptor and the service's own stay out of the child."""
    script, out = tmp_path / "fds.py", tmp_path / "api.json"
    script.write_text(FD_MAP)
    read_end, write_end = os.pipe()
    os.set_inheritable(read_end, True)
    try:
        done = processkit.run([sys.executable, str(script), str(out)], capture_output=True, timeout=60)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert done.returncode == 0, done.stderr
    assert sorted(_child_fds(out), key=int) == ["0", "1", "2"], _child_fds(out)


MAKEFILE = """\
all:
\t+{cli} run --jsonl $(CURDIR)/run.jsonl -- $(MAKE) -C sub
direct:
\t+$(MAKE) -C sub
"""
SUB_MAKEFILE = """\
all: a b c
a b c:
\t@echo "$@ MAKEFLAGS=$(MAKEFLAGS)"
"""


def _gnu_make_with_a_pipe() -> list[str] | None:
    """``make`` and the options that make its jobserver a pipe of descriptors (GNU make 4.4 and
    later default to a named FIFO, which no descriptor carries), or None without GNU make."""
    if shutil.which("make") is None:
        return None
    version = subprocess.run(["make", "--version"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if not version.stdout.startswith("GNU Make"):
        return None
    styled = subprocess.run(
        ["make", "--jobserver-style=pipe", "--version"], capture_output=True, stdin=subprocess.DEVNULL
    )
    return ["make", "--jobserver-style=pipe"] if styled.returncode == 0 else ["make"]


MAKE = _gnu_make_with_a_pipe()
# A suite run from inside a make (a packager's build) must not hand that make's jobserver on.
MAKE_VARIABLES = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEFILES", "GNUMAKEFLAGS")


@pytest.mark.skipif(MAKE is None, reason="no GNU make")
def test_sub_make_under_run_keeps_the_jobserver(tmp_path, spawn_backend):
    """The sub-make ``run`` starts gets its parent's jobserver as when the recipe runs it
    directly: -j4 and its pipe, not "jobserver unavailable: using -j1"."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "Makefile").write_text(MAKEFILE.format(cli=" ".join(cli_command())))
    (tmp_path / "sub" / "Makefile").write_text(SUB_MAKEFILE)
    env = {name: value for name, value in os.environ.items() if name not in MAKE_VARIABLES}
    outputs = {}
    for target in ("direct", "all"):
        done = subprocess.run(
            [*MAKE, "-j4", target],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        outputs[target] = done.stdout + done.stderr
    for target, output in outputs.items():
        assert "jobserver unavailable" not in output, (target, output)
        assert output.count("--jobserver-auth=") == 3 and output.count(" -j4 ") == 3, (target, output)
