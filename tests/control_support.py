"""Shared by the registry and control-plane tests: real runs started in the background, the
clients' JSON outputs, and checks against the reference schemas."""

from __future__ import annotations

import json
import os
import socket
import signal
import subprocess
from pathlib import Path

import jsonschema
import pytest

from conftest import REFERENCE_SCHEMAS, reference_schemas_present, run_cli, start_cli, wait_for_event
from streams import wait_until

SLEEPER = ("sleep", "120")


STARTED = "2026-07-20T21:00:00.000Z"


def registry_record(run_id: str, lock: str, **fields) -> dict:
    """A hand-written v1 registry record whose liveness is the advisory lock file ``lock``."""
    document = {
        "registry_version": 1,
        "run_id": run_id,
        "endpoint": None,
        "started_at": STARTED,
        "argv_sha256": None,
        "hint": None,
        "labels": {},
        "jsonl": None,
        "capture_dir": None,
        "liveness": {"kind": "advisory_lock", "lock_file": lock},
    }
    document.update(fields)
    return document


def check_schema(name: str, instance) -> None:
    """Validate ``instance`` against the reference schema ``name``; without the reference
    directory there is nothing to validate against (test_reference_schemas skips instead)."""
    if not reference_schemas_present():
        return
    path = REFERENCE_SCHEMAS / f"{name}.schema.json"
    jsonschema.Draft202012Validator(json.loads(path.read_text(encoding="utf-8"))).validate(instance)


def envelope(proc: subprocess.CompletedProcess) -> dict:
    """The one-line --error-format json envelope on stderr, schema-checked."""
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1, proc.stderr
    document = json.loads(lines[0])
    check_schema("error", document)
    assert document["code"] == proc.returncode
    return document


def json_out(proc: subprocess.CompletedProcess):
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == 1, proc.stdout
    return json.loads(lines[0])


def cli_json(*args, expect: int = 0):
    proc = run_cli(*args)
    assert proc.returncode == expect, (proc.returncode, proc.stdout, proc.stderr)
    return json_out(proc)


def listed(*args) -> list[dict]:
    proc = run_cli("list", "--json", *args)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    for row in rows:
        check_schema("list", row)
    return rows


def start_waiter(*args, **kwargs) -> subprocess.Popen:
    """A ``wait`` client, returned once it has looked at the registry: it is then asleep
    between polls (seen in /proc), so runs that end afterwards are ones it was waiting for."""
    waiter = start_cli("wait", *args, **kwargs)
    wait_until(lambda: waiter.poll() is not None or _sleeping(waiter.pid), what="the waiter's first poll")
    return waiter


def _sleeping(pid: int) -> bool:
    try:
        wchan = Path(f"/proc/{pid}/wchan").read_text()
        syscall = Path(f"/proc/{pid}/syscall").read_text().split()
    except OSError:
        return False
    # clock_nanosleep is syscall 230 on x86_64 and 115 on aarch64
    return "nanosleep" in wchan or syscall[:1] in (["230"], ["115"])


class LiveRun:
    def __init__(self, proc: subprocess.Popen, jsonl: Path, run_id: str):
        self.proc = proc
        self.jsonl = jsonl
        self.run_id = run_id
        self.started: dict = {}

    def finish(self, timeout: float = 60) -> int:
        code = self.proc.wait(timeout)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return code


@pytest.fixture
def runs(tmp_path):
    """``runs(*command, run_id=.., labels=.., options=..)`` starts a real run and returns once
    it is registered and serving (its run_started event exists). Leftovers get SIGTERM."""
    started: list[LiveRun] = []

    def start(*command, run_id: str = "r1", labels=(), options=(), env=None, cwd=None) -> LiveRun:
        jsonl = tmp_path / f"{run_id}-{len(started)}.jsonl"
        args = ["run", "--run-id", run_id, "--no-echo", "--jsonl", jsonl]
        for label in labels:
            args += ["--label", label]
        run = LiveRun(start_cli(*args, *options, "--", *(command or SLEEPER), env=env, cwd=cwd), jsonl, run_id)
        started.append(run)
        run.started = wait_for_event(jsonl, "run_started")
        return run

    yield start
    for run in started:
        if run.proc.poll() is None:
            run.proc.send_signal(signal.SIGTERM)
        run.finish()


def mode(path) -> int:
    return os.stat(path).st_mode & 0o777


def exchange(endpoint: str, payload: bytes, *, half_close: bool = True) -> bytes:
    """Send raw bytes, then read whatever single reply comes back."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(endpoint)
        try:
            sock.sendall(payload)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before taking it all
        reply = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            reply += chunk
    return reply
