"""A runner started with one of its standard streams closed (``<&-``, ``>&-``, a supervisor that
closed them) hands a child that inherits that stream ``/dev/null``, as the reference does (Rust's
runtime opens it there before ``main``): never a closed descriptor, whose number the child's
first ``open`` would take as its stdin or stdout (docs/io-modes.md)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import SAFETY_NET, cli_command
from streams import check_stream

# Writes what each of its standard descriptors is (a path, or the errno of a closed one).
REPORTER = (
    "import json, os, sys\n"
    "seen = {}\n"
    "for fd in (0, 1, 2):\n"
    "    try:\n"
    "        os.fstat(fd)\n"
    "        seen[fd] = os.readlink(f'/proc/self/fd/{fd}')\n"
    "    except OSError as exc:\n"
    "        seen[fd] = exc.strerror\n"
    "open(sys.argv[1], 'w').write(json.dumps(seen))\n"
)


@pytest.mark.parametrize(
    ("mode", "closing", "fd"),
    [("--inherit-stdin", "<&-", "0"), ("--inherit-stdio", "<&-", "0"), ("--inherit-stdio", ">&-", "1")],
)
def test_a_closed_stream_the_child_inherits_is_dev_null(tmp_path, mode, closing, fd):
    report = tmp_path / "fds.json"
    command = [*cli_command(), "run", mode, "--jsonl", "run.jsonl", "--", sys.executable, "-c", REPORTER, report]
    proc = subprocess.run(
        ["sh", "-c", f'exec "$@" {closing}', "sh", *map(str, command)],
        cwd=tmp_path,
        capture_output=True,
        timeout=SAFETY_NET,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(report.read_text())[fd] == "/dev/null"
    check_stream(tmp_path / "run.jsonl", 0)
