"""A run's own child could take every control connection of its run: sixty-four connections held
open without a request (reopened as each is closed) left the user's ``cancel`` queued behind
them past its 5 s deadline (103, ``ipc_deadline``), for as long as the child kept at it. The
run's own processes now hold at most MEMBER_CONNECTIONS of the server's connections (their
oldest idle one is dropped for a newer), so its owner's cancel always finds a slot."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import cli_command, run_cli, start_cli

HOLDS = 64

# Each child here first finds its run's endpoint, and connects to it by ``connect()``.
CONNECTING = r"""
import json, select, socket, subprocess, sys
run_id, cli, count = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
endpoint = None
while endpoint is None:
    listed = subprocess.run(cli + ["list", "--json"], capture_output=True).stdout.splitlines()
    endpoint = next((r["endpoint"] for r in map(json.loads, listed) if r["run_id"] == run_id), None)

def connect():
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(endpoint)
    return sock
"""

# The run's child: holds HOLDS connections that never send a byte, reopening each one the
# runner closes; says "holding" once they are all open.
CHILD = (
    CONNECTING
    + r"""
held = [connect() for _ in range(count)]
print("holding", flush=True)
while True:
    for sock in select.select(held, [], [])[0]:
        held.remove(sock)
        sock.close()
        held.append(connect())
"""
)


# The run's child: as CHILD, but each connection is made by a grandchild that exits at once; the
# first ones while the runner is stopped, so every peer pid the runner reads is gone already.
ORPHANED_CHILD = (
    CONNECTING
    + r"""
import os, signal

def connect():
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        sock.connect(endpoint)
        os._exit(0)
    os.waitpid(pid, 0)
    return sock

os.kill(os.getppid(), signal.SIGSTOP)  # the runner: its listen queue takes them all meanwhile
held = [connect() for _ in range(count)]
os.kill(os.getppid(), signal.SIGCONT)
"""
    + CHILD.removeprefix(CONNECTING).replace("held = [connect() for _ in range(count)]\n", "")
)


@pytest.mark.parametrize("mechanism", ["default", "process_group"])
def test_the_owners_cancel_gets_through_a_child_holding_every_connection(tmp_path, monkeypatch, mechanism):
    if mechanism == "process_group":
        monkeypatch.setenv("PROCESSKIT_CONTAINMENT", "process_group")
    stream = tmp_path / "run.jsonl"
    child = [sys.executable, "-c", CHILD, "held", json.dumps(cli_command()), str(HOLDS)]
    run = start_cli("run", "--run-id", "held", "--jsonl", stream, "--", *child)
    try:
        assert run.stdout.readline() == b"holding\n", run.stderr.read1()  # type: ignore[union-attr]
        cancelled = run_cli("cancel", "--run-id", "held", timeout=60)
        assert cancelled.returncode == 0, cancelled.stderr
        assert json.loads(cancelled.stdout) == {"accepted": True, "action": "cancel", "run_id": "held"}
        assert run.wait(timeout=60) == 108
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()


# The run's child: opens BURST connections, each sending ``attest`` as soon as it is open, before
# reading any reply; prints each one's verdict (None: closed unanswered).
BURST_CHILD = (
    CONNECTING
    + r"""
def asking():
    sock = connect()
    sock.sendall(b"attest\n")
    return sock

socks = [asking() for _ in range(count)]

def reply(sock):
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return json.loads(data)["verdict"] if data else None

print(json.dumps([reply(sock) for sock in socks]), flush=True)
"""
)
BURST = 12  # more than MEMBER_CONNECTIONS, fewer than MAX_CONNECTIONS


def test_a_members_burst_of_whole_requests_is_answered(tmp_path):
    """A member's connection counted as idle until the server read it, and a turn accepts many:
    the 9th accepted closed the 1st although its ``attest`` waited whole in it (103 for a fast
    client). A request already there is now served before anything is closed."""
    child = [sys.executable, "-c", BURST_CHILD, "burst", json.dumps(cli_command()), str(BURST)]
    run = start_cli("run", "--run-id", "burst", "--jsonl", tmp_path / "run.jsonl", "--", *child)
    try:
        assert json.loads(run.stdout.readline()) == ["member"] * BURST, run.stderr.read1()  # type: ignore[union-attr]
        assert run.wait(timeout=60) == 0
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()


@pytest.mark.parametrize("mechanism", ["default", "process_group"])
def test_connections_whose_peer_is_gone_count_against_the_members_share(tmp_path, monkeypatch, mechanism):
    """A peer pid gone at the runner's asking read as "not a member": a child connecting from
    grandchildren that exit at once took all 16 connections (more waiting behind them), and its owner's cancel ended 103.
    A gone peer now counts as the run's own (a real client waits alive for its reply)."""
    if mechanism == "process_group":
        monkeypatch.setenv("PROCESSKIT_CONTAINMENT", "process_group")
    child = [sys.executable, "-c", ORPHANED_CHILD, "orphans", json.dumps(cli_command()), str(HOLDS)]
    run = start_cli("run", "--run-id", "orphans", "--jsonl", tmp_path / "run.jsonl", "--", *child)
    try:
        assert run.stdout.readline() == b"holding\n", run.stderr.read1()  # type: ignore[union-attr]
        cancelled = run_cli("cancel", "--run-id", "orphans", timeout=60)
        assert cancelled.returncode == 0, cancelled.stderr
        assert run.wait(timeout=60) == 108
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
