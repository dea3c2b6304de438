"""Control clients at once (issue 23): one live run, then a burst of clients.

Two bursts against the same run: ``--connections`` raw connections opened by this process
before any of them sends a byte (a server that refuses instead of queueing shows as refused
connects), then ``--clients`` real ``inspect --run-id X --json`` processes started together.
Reported: refused and answered connections, and the clients' exit codes with the burst's wall
time (figures for bench/README.md).

    python3 bench/control_burst.py                          # 200 connections, 200 clients
    python3 bench/control_burst.py --connections 500 --clients 60
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

from soak import cli


def _burst(endpoint: str, count: int) -> tuple[list[socket.socket], int]:
    """``count`` non-blocking connects at once: those that completed, and how many were refused
    (a full listen queue is EAGAIN at once for a non-blocking connect)."""
    held, refused = [], 0
    for _ in range(count):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        if sock.connect_ex(endpoint) == 0:
            held.append(sock)
        else:
            refused += 1
            sock.close()
    return held, refused


def _answered(sock: socket.socket) -> bool:
    sock.settimeout(30)
    sock.sendall(b"inspect\n")
    data = b""
    while b"\n" not in data and (chunk := sock.recv(65536)):
        data += chunk
    sock.close()
    return b'"run_id"' in data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--clients", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pk-burst-") as scratch:
        env = dict(os.environ, PROCESSKIT_CLI_REGISTRY_DIR=os.path.join(scratch, "registry"))
        jsonl = os.path.join(scratch, "run.jsonl")
        runner = subprocess.Popen(
            [cli(), "run", "--jsonl", jsonl, "--run-id", "burst", "--no-echo", "--", "sleep", "600"],
            env=env,
            stdin=subprocess.DEVNULL,
        )
        try:
            while not os.path.exists(jsonl) or b"run_started" not in open(jsonl, "rb").read():
                time.sleep(0.01)
            listed = subprocess.run([cli(), "list", "--json"], env=env, capture_output=True, check=True)
            endpoint = json.loads(listed.stdout)["endpoint"]
            held, refused = _burst(endpoint, args.connections)
            answered = sum(_answered(sock) for sock in held)
            print(f"raw connections: {args.connections}, refused {refused}, answered {answered}")
            started = time.monotonic()
            clients = [
                subprocess.Popen(
                    [cli(), "inspect", "--run-id", "burst", "--json"],
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for _ in range(args.clients)
            ]
            codes = collections.Counter(client.wait() for client in clients)
            wall = time.monotonic() - started
            print(f"inspect clients: {args.clients}, exit codes {dict(codes)}, wall {wall:.1f}s")
        finally:
            runner.send_signal(signal.SIGTERM)
            runner.wait()


if __name__ == "__main__":
    sys.exit(main())
