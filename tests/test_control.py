"""The live control plane, end to end: real runs, the real clients, the runner's socket."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import time

import pytest

from conftest import cli_command, read_events, registry_entries, run_cli, wait_for_event
from processkit.engine.endings import format_duration
from control_support import check_schema, cli_json, envelope, exchange, json_out, listed, mode, runs, start_waiter  # noqa: F401


def _endpoint(run_id: str) -> str:
    (row,) = [r for r in listed() if r["run_id"] == run_id]
    return row["endpoint"]


def test_inspect_then_cancel(runs, isolated_registry):
    run = runs(run_id="build-1", labels=("lane=a",))
    snapshot = cli_json("inspect", "--run-id", "build-1", "--json")
    check_schema("inspect", snapshot)
    assert snapshot["run_id"] == "build-1"
    assert snapshot["root_pid"] == run.started["root_pid"]
    assert run.started["root_pid"] in [m["pid"] for m in snapshot["members"]]
    assert snapshot["mechanism"] == run.started["mechanism"]
    assert snapshot["jsonl"] == str(run.jsonl) and os.path.isabs(snapshot["jsonl"])
    assert snapshot["started_at"] == listed()[0]["started_at"]

    human = run_cli("inspect", "--run-id", "build-1")
    assert human.returncode == 0
    text = human.stdout.decode()
    assert "run_id:" in text and "members:" in text and "START_TIME" in text
    assert str(run.started["root_pid"]) in text

    endpoint = _endpoint("build-1")
    assert stat.S_ISSOCK(os.stat(endpoint).st_mode) and mode(endpoint) == 0o600
    assert mode(os.path.dirname(endpoint)) == 0o700

    ack = cli_json("cancel", "--run-id", "build-1")
    check_schema("control-ack", ack)
    assert ack == {"accepted": True, "action": "cancel", "run_id": "build-1"}
    assert run.finish() == 108
    events = read_events(run.jsonl)
    assert [e["source"] for e in events if e["event"] == "cancelled"] == ["control_cancel"]
    assert events[-1]["event"] == "runner_exit" and (events[-1]["code"], events[-1]["source"]) == (
        108,
        "control_cancel",
    )
    assert not os.path.exists(os.path.dirname(endpoint))
    assert registry_entries(isolated_registry) == []


def test_kill_is_immediate_even_under_a_long_grace(runs):
    run = runs("sh", "-c", "trap '' TERM; sleep 120", run_id="stubborn", options=("--grace", "60s"))
    started = time.monotonic()
    ack = cli_json("kill", "--run-id", "stubborn")
    check_schema("control-ack", ack)
    assert ack["action"] == "kill"
    assert run.finish() == 109
    assert time.monotonic() - started < 40  # the grace a kill skips is 60 s
    events = read_events(run.jsonl)
    assert [e["source"] for e in events if e["event"] == "killed"] == ["control_kill"]
    assert not [e for e in events if e["event"] == "cancelled"]
    (finished,) = [e for e in events if e["event"] == "cleanup_finished"]
    assert finished["soft_terminate"] is None
    assert (events[-1]["code"], events[-1]["source"]) == (109, "control_kill")


def test_a_kill_during_a_cancels_grace_ends_the_grace_at_once(runs):
    """A caller escalating from cancel to kill: the kill's ack was a promise the run kept only
    once the whole grace had passed. The ending stays the cancel's (one ending event)."""
    run = runs("sh", "-c", "trap '' TERM; sleep 1200", run_id="escalated", options=("--grace", "10m"))
    assert cli_json("cancel", "--run-id", "escalated")["accepted"]
    wait_for_event(run.jsonl, "cleanup_started")  # the soft stop's grace runs from here
    assert cli_json("kill", "--run-id", "escalated")["accepted"]
    assert run.finish() == 108
    events = read_events(run.jsonl)
    assert [e["event"] for e in events if e["event"] in ("cancelled", "killed")] == ["cancelled"]
    (finished,) = [e for e in events if e["event"] == "cleanup_finished"]
    assert (finished["shutdown"]["drained_within_grace"], finished["shutdown"]["escalated"]) == (False, True)
    assert finished["remaining"] == 0
    assert (events[-1]["code"], events[-1]["source"]) == (108, "control_cancel")


def test_a_kill_that_cut_the_grace_short_is_not_said_to_have_waited_it(runs, pump_backend):
    """The runner's last line said "waited 10m grace, then hard-killed any survivors" of a run
    whose grace a control kill ended after a moment: the caller read a wait that never was.
    It now says how long the tree had, and that a kill cut the grace short."""
    run = runs("sh", "-c", "trap '' TERM; sleep 1200", run_id="cut", options=("--grace", "10m"))
    assert cli_json("cancel", "--run-id", "cut")["accepted"]
    wait_for_event(run.jsonl, "cleanup_started")
    assert cli_json("kill", "--run-id", "cut")["accepted"]
    assert run.proc.wait(60) == 108
    said = run.proc.stderr.read().decode()
    (finished,) = [e for e in read_events(run.jsonl) if e["event"] == "cleanup_finished"]
    waited = finished["shutdown"]["elapsed_ms"]
    assert "waited 10m grace" not in said and "waited 600s grace" not in said, said
    assert (
        f"waited {format_duration(waited)} of its 600s grace until a control kill cut it short, then hard-killed"
        in said
    ), said
    run.finish()


def test_cancel_all_hits_exactly_the_matching_runs(runs):
    a1 = runs(run_id="a1", labels=("lane=a",))
    a2 = runs(run_id="a2", labels=("lane=a", "team=x"))
    b = runs(run_id="b", labels=("lane=b",))
    report = cli_json("inspect", "--all", "--label", "lane=b", "--json")
    check_schema("inspect", report)
    assert [(r["run_id"], r["status"]) for r in report] == [("b", "inspected")]

    waiter = start_waiter("--all", "--label", "lane=a", "--report-outcome")
    report = cli_json("cancel", "--all", "--label", "lane=a")
    check_schema("control-ack", report)
    assert sorted((r["run_id"], r["status"], r["accepted"], r["error"]) for r in report) == [
        ("a1", "accepted", True, None),
        ("a2", "accepted", True, None),
    ]
    assert a1.finish() == 108 and a2.finish() == 108
    out, _ = waiter.communicate(timeout=60)
    assert waiter.returncode == 0
    outcomes = json.loads(out)
    check_schema("wait", outcomes)
    assert [(o["run_id"], o["code"], o["source"]) for o in outcomes] == [
        ("a1", 108, "control_cancel"),
        ("a2", 108, "control_cancel"),
    ]

    assert [(r["run_id"], r["health"]) for r in listed()] == [("b", "live")]
    assert cli_json("cancel", "--all", "--label", "lane=a") == []
    assert b.proc.poll() is None
    assert [r["status"] for r in cli_json("kill", "--all")] == ["accepted"]
    assert b.finish() == 109


@pytest.mark.parametrize("containment", ["cgroup_v2", "process_group"])
def test_attest_from_inside_and_outside(runs, tmp_path, containment, monkeypatch):
    if containment == "process_group":
        monkeypatch.setenv("PROCESSKIT_CONTAINMENT", "process_group")
    trigger, out = tmp_path / "trigger", tmp_path / "attest.out"
    script = f'while [ ! -e "{trigger}" ]; do sleep 0.02; done; "$@" > "{out}"'
    run = runs("sh", "-c", script, "sh", *cli_command(), "attest", "--run-id", "att", "--json", run_id="att")
    if containment == "process_group":
        assert run.started["mechanism"] == "process_group"

    outside = run_cli("--error-format", "json", "attest", "--run-id", "att", "--json")
    assert outside.returncode == 115
    verdict = json_out(outside)
    check_schema("attest", verdict)
    assert (verdict["verdict"], verdict["run_id"], verdict["mechanism"]) == (
        "not_a_member",
        "att",
        run.started["mechanism"],
    )
    problem = envelope(outside)
    assert (problem["kind"], problem["operation"], problem["run_id"]) == ("not_a_member", "attest", "att")

    trigger.touch()
    assert run.finish() == 0  # the child exits with attest's own code
    inside = json.loads(out.read_text())
    check_schema("attest", inside)
    assert inside["verdict"] == "member" and inside["peer_pid"] not in (None, os.getpid())


def _error_reply(reply: bytes) -> str:
    assert reply.endswith(b"\n") and reply.count(b"\n") == 1, reply
    document = json.loads(reply)
    assert list(document) == ["error"], document
    return document["error"]


def _served_beside_a_silent_client(run_id: str, attempts: int = 5) -> bool:
    """Whether an ``inspect`` was answered while a client that sent nothing was still connected
    (the server had not dropped it yet): on a server that waits for the silent client, the
    answer comes only after the drop. An answer slower than the drop proves nothing either way,
    so it is asked again."""
    for _ in range(attempts):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
            silent.connect(_endpoint(run_id))
            assert cli_json("inspect", "--run-id", run_id, "--json")["run_id"] == run_id
            silent.setblocking(False)
            try:
                silent.recv(1)
            except BlockingIOError:
                return True
    return False


def _exit_beside_open_connections(endpoint: str, proc, bound: float = 120.0) -> bool:
    """Whether ``proc`` exits while idle connections to ``endpoint`` stay open: a fresh one is
    opened each half second, before the server's own deadline drops the older ones, so a run
    that waited for its connections to close would wait past ``bound`` (a safety net)."""
    held: list[socket.socket] = []
    deadline = time.monotonic() + bound
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            held.append(sock)
            try:
                sock.connect(endpoint)
            except OSError:
                pass  # the run is closing its server
            try:
                proc.wait(0.5)
            except subprocess.TimeoutExpired:
                pass
    finally:
        for sock in held:
            sock.close()
    return proc.poll() is not None


def test_garbage_on_the_socket_never_affects_the_run(runs, tmp_path):
    trigger = tmp_path / "trigger"
    run = runs("sh", "-c", f'while [ ! -e "{trigger}" ]; do sleep 0.02; done; exit 3', run_id="g")
    endpoint = _endpoint("g")
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.connect(endpoint)  # connects and never sends

    # the reference's words (its read_bounded_line, tokio's read_line for UTF-8)
    rejected = "control request rejected: "
    assert _error_reply(exchange(endpoint, b"\xff\xfe\x00binary\n")) == rejected + "stream did not contain valid UTF-8"
    assert _error_reply(exchange(endpoint, b"frobnicate\n")) == "unknown control request `frobnicate`"
    assert "unknown control request" in _error_reply(exchange(endpoint, b"inspect now\n"))
    overlong = "line exceeded the 65536-byte control-plane limit without a terminating newline"
    assert _error_reply(exchange(endpoint, b"x" * 200_000, half_close=False)) == rejected + overlong
    cut = "the peer closed the connection before terminating its control-plane line"
    assert _error_reply(exchange(endpoint, b"insp")) == rejected + cut  # half-closed mid-verb
    for empty in (b"  \n", b""):  # an empty line means inspect, and so does nothing before the half-close
        blank = json.loads(exchange(endpoint, empty))
        assert blank["run_id"] == "g" and blank["snapshot_version"] == 2

    assert _served_beside_a_silent_client("g"), "a silent client delayed others: each inspect came after its drop"
    assert run.proc.poll() is None and [r["health"] for r in listed()] == ["live"]
    silent.close()

    timed = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    timed.connect(endpoint)
    opened = time.monotonic()
    timed.settimeout(30)
    assert timed.recv(1) == b""  # the server gives up on a silent client
    assert 4 < time.monotonic() - opened < 8
    timed.close()

    lingering = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lingering.connect(endpoint)
    trigger.touch()
    assert _exit_beside_open_connections(endpoint, run.proc), "an open connection held up the run's exit"
    assert run.finish() == 3
    lingering.settimeout(5)
    assert lingering.recv(1) == b""
    lingering.close()
    assert read_events(run.jsonl)[-1]["source"] == "child_exit"


@pytest.mark.parametrize(
    "args",
    [
        ("inspect",),
        ("cancel",),
        ("kill", "--label", "a=b"),
        ("inspect", "--run-id", "x", "--all"),
        ("attest", "--all"),
        ("attest",),
        ("cancel", "--all", "--label", "no-equals"),
        ("inspect", "--run-id", "bad\u0007id"),
        ("cancel", "--run-id", "a", "--run-id", "b"),
    ],
)
def test_client_usage_errors_exit_100(args):
    proc = run_cli("--error-format", "json", *args)
    assert proc.returncode == 100, proc.stderr
    assert proc.stdout == b""
    assert proc.stderr.startswith(b"processkit-cli: ")


def test_a_missing_run_is_refused_with_an_envelope_naming_it():
    for verb in ("inspect", "cancel", "kill", "attest"):
        proc = run_cli("--error-format", "json", verb, "--run-id", "ghost")
        assert proc.returncode == 103 and proc.stdout == b""
        problem = envelope(proc)
        assert (problem["kind"], problem["operation"], problem["run_id"], problem["retryable"]) == (
            "not_found",
            verb,
            "ghost",
            False,
        )
    assert cli_json("cancel", "--all") == []
    human = run_cli("inspect", "--all")
    assert (human.returncode, human.stdout) == (0, b"no live runs to inspect\n")
