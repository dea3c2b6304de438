"""Many control clients at once against one live run (issue 23): the server queues what it
cannot serve yet, and a client that finds even the queue full retries within its deadline. A
busy run is not an unreachable one."""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import time

from conftest import SAFETY_NET, cli_command, run_cli
from control_support import runs  # noqa: F401 - the fixture
from streams import read_until, wait_until

CLIENTS = 200
PROCESS_CLIENTS = 60


def _endpoint() -> str:
    return json.loads(run_cli("list", "--json").stdout)["endpoint"]


def _connect_now(endpoint: str) -> socket.socket:
    """A non-blocking connect: it completes at once while the listen queue has room, and is
    EAGAIN (BlockingIOError) when it does not."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        sock.connect(endpoint)
    except OSError:
        sock.close()
        raise
    return sock


def _reply(sock: socket.socket) -> dict:
    sock.settimeout(30)
    sock.sendall(b"inspect\n")
    data = read_until(sock, b"\n", "no reply", 30)
    return json.loads(data.split(b"\n", 1)[0])


def test_two_hundred_connections_at_once_are_queued_then_all_answered(runs):
    """Two hundred clients connect before any sends a byte: none is refused (those past the
    server's connection cap wait in the listen queue), and each then gets its inspect reply."""
    runs(run_id="busy")
    endpoint = _endpoint()
    held = []
    try:
        for _ in range(CLIENTS):
            held.append(_connect_now(endpoint))
        replies = [_reply(sock) for sock in held]
    finally:
        for sock in held:
            sock.close()
    assert [reply["run_id"] for reply in replies] == ["busy"] * CLIENTS


def test_sixty_inspect_clients_at_once_all_get_their_answer(runs):
    """The issue's reproduction: real clients, started together (their start-up spreads them
    out on a small machine; the raw test above is the one that holds 200 at once)."""
    run = runs(run_id="polled")
    clients = [
        subprocess.Popen(
            cli_command() + ["inspect", "--run-id", "polled", "--json"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(PROCESS_CLIENTS)
    ]
    results = [(client.communicate(timeout=120), client.returncode) for client in clients]
    failures = [(code, err.decode()) for (_, err), code in results if code != 0]
    assert failures == []
    assert {json.loads(out)["root_pid"] for (out, _), _ in results} == {run.started["root_pid"]}


def test_a_client_that_finds_the_queue_full_waits_for_room(runs):
    """Every connection slot and the whole listen queue are taken by idle connections: a client
    started then retries (a full queue is EAGAIN) and gets its answer once they go."""
    runs(run_id="jammed")
    endpoint = _endpoint()
    held = []
    try:
        _fill(endpoint, held)
        client = subprocess.Popen(
            cli_command() + ["inspect", "--run-id", "jammed", "--json"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        # Hold the queue full until the client is backing off (asleep with its socket between
        # connects) or gone: it has found the queue full by then, so only a retry can pass.
        wait_until(lambda: _backing_off_or_gone(client.pid), what="the client backing off a full queue")
    finally:
        for sock in held:
            sock.close()
    out, err = client.communicate(timeout=SAFETY_NET)
    assert client.returncode == 0, err
    assert json.loads(out)["run_id"] == "jammed"


def _fill(endpoint: str, held: list) -> None:
    """Take every connection slot and the whole listen queue, whatever their sizes: connect
    until the queue has stayed full for a while (the server accepts up to its cap meanwhile,
    and each accept makes room for one more)."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
    full_for = 0
    while full_for < 20:
        try:
            held.append(_connect_now(endpoint))
            full_for = 0
        except BlockingIOError:
            full_for += 1
            time.sleep(0.01)


CLOCK_NANOSLEEP = {"x86_64": "230", "aarch64": "115"}  # what time.sleep calls


def _backing_off_or_gone(pid: int) -> bool:
    """The process sleeps while it holds a socket (its backoff between connects), or has exited."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        with open(f"/proc/{pid}/syscall") as handle:
            asleep = handle.read().split()[0] == CLOCK_NANOSLEEP.get(os.uname().machine)
        sockets = [fd for fd in os.listdir(f"/proc/{pid}/fd") if _is_socket(pid, fd)]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return asleep and bool(sockets)


def _is_socket(pid: int, fd: str) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
    except OSError:
        return False
