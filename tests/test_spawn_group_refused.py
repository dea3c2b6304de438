"""A child refused its own process group (setpgid failing) was said by the Popen spawn as
"Exception occurred in preexec_fn.", with no errno; the native spawn said the errno's words in
its attach step. Both now say the same: ``container_failed``, phase ``attach``, the errno."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys

import pytest
from conftest import SAFETY_NET, cli_command
from streams import check_stream
from test_spawn import ATTACH_PREFIX

# A seccomp filter (inherited by the runner, and so by its child) under which setpgid fails with
# EPERM; the runner calls none itself. Then the CLI, its arguments after the script's.
REFUSING_SETPGID = r"""
import ctypes, os, struct, sys
ld, jeq, ret = 0x20, 0x15, 0x06
program = [(ld, 0, 0, 4), (jeq, 0, 3, 0xC000003E), (ld, 0, 0, 0), (jeq, 0, 1, 109), (ret, 0, 0, 0x00050000 | 1), (ret, 0, 0, 0x7FFF0000)]
filters = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *op) for op in program))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0
assert libc.prctl(22, 2, ctypes.c_char_p(struct.pack("HxxxxxxP", len(program), ctypes.addressof(filters))), 0, 0) == 0
os.execv(sys.argv[1], sys.argv[1:])
"""


def test_a_child_refused_its_process_group_fails_the_attach_with_the_errno(tmp_path, spawn_backend, monkeypatch):
    if os.uname().machine != "x86_64":
        pytest.skip("the filter names x86-64's system call numbers")
    monkeypatch.setenv("PROCESSKIT_CONTAINMENT", "process_group")
    jsonl = tmp_path / "run.jsonl"
    command = cli_command()
    if len(command) > 1:  # python -m processkit: exec'd as the interpreter
        command = [sys.executable, *command[1:]]
    done = subprocess.run(
        [sys.executable, "-c", REFUSING_SETPGID, *command, "run", "--jsonl", str(jsonl), "--", "true"],
        cwd=tmp_path,
        capture_output=True,
        timeout=SAFETY_NET,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 102 and b"Traceback" not in done.stderr, done.stderr
    events = check_stream(jsonl, done.returncode)
    failed = next(event for event in events if event["event"] == "container_failed")
    assert failed["phase"] == "attach" and failed["message"].startswith(ATTACH_PREFIX), json.dumps(failed)
    assert failed["message"].endswith(f": {os.strerror(errno.EPERM)}"), failed["message"]
