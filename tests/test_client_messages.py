"""The by-id clients' messages, which users and scripts grep: each names the action and the
run ("cannot cancel run `x`: ..."), as the reference's do; an invalid endpoint is refused
before any connection; ``wait --all --timeout`` says what is still outstanding."""

from __future__ import annotations

import fcntl
import json
import os
import socket

import pytest

from conftest import SAFETY_NET, run_cli
from control_support import envelope, registry_record, runs, start_waiter  # noqa: F401


def _entry(registry, stem: str, run_id: str, *, endpoint=None, hold: bool = True, lock: bool = True):
    """A hand-written registry entry; ``hold`` plays its live runner by holding the lock."""
    record = registry_record(run_id, f"{stem}.lock", endpoint=endpoint)
    (registry / f"{stem}.json").write_text(json.dumps(record))
    if not lock:
        return None
    fd = os.open(registry / f"{stem}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    if hold:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def refused(*args, code: int = 103) -> dict:
    proc = run_cli("--error-format", "json", *args)
    assert proc.returncode == code and proc.stdout == b"", proc.stderr
    return envelope(proc)


@pytest.mark.parametrize(
    "verb, action", [("inspect", "inspect"), ("cancel", "cancel"), ("kill", "kill"), ("wait", "wait for")]
)
def test_an_ambiguous_run_id_names_the_action_and_the_count(isolated_registry, verb, action):
    held = [_entry(isolated_registry, "run-a", "twin"), _entry(isolated_registry, "run-b", "twin")]
    problem = refused(verb, "--run-id", "twin")
    assert problem["kind"] == "ambiguous_run_id"
    assert problem["message"].startswith(f"cannot {action} run `twin`: ambiguous run id — 2 live runs ")
    human = run_cli(verb, "--run-id", "twin")
    assert human.stderr.decode().startswith(
        f"processkit-cli: cannot {action} run `twin`: ambiguous run id — 2 live runs"
    )
    for fd in held:
        os.close(fd)


@pytest.mark.parametrize("verb", ["inspect", "cancel", "kill", "attest"])
def test_no_such_run_names_the_action(verb):
    problem = refused(verb, "--run-id", "ghost")
    assert problem["kind"] == "not_found"
    assert problem["message"] == f"cannot {verb} run `ghost`: no run with that id is registered"


@pytest.mark.parametrize("verb", ["inspect", "cancel", "kill", "attest"])
def test_a_stale_or_unprobed_run_names_the_action(isolated_registry, verb):
    _entry(isolated_registry, "run-d", "dead", hold=False)
    assert refused(verb, "--run-id", "dead")["message"].startswith(
        f"cannot {verb} run `dead`: its registry entry is stale"
    )
    _entry(isolated_registry, "run-l", "linked", lock=False)
    os.symlink(isolated_registry / "run-d.lock", isolated_registry / "run-l.lock")  # O_NOFOLLOW: unprobed
    problem = refused(verb, "--run-id", "linked")
    assert problem["kind"] == "unprobed" and problem["message"].startswith(
        f"cannot {verb} run `linked`: its liveness could not be probed"
    )


@pytest.mark.parametrize("shape", ["relative", "other-directory", "wrong-name"])
@pytest.mark.parametrize("verb", ["inspect", "cancel", "kill", "attest"])
def test_an_invalid_endpoint_is_refused_before_any_connection(isolated_registry, tmp_path, monkeypatch, verb, shape):
    """A socket that listens where a forged record points is never connected to."""
    monkeypatch.chdir(tmp_path)
    where = {
        "relative": "c.sock",
        "other-directory": str(tmp_path / "c.sock"),
        "wrong-name": str(tmp_path / "pkc-1" / "evil.sock"),
    }[shape]
    os.makedirs(os.path.dirname(os.path.abspath(where)), exist_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(where)
    listener.listen(1)
    listener.setblocking(False)
    held = _entry(isolated_registry, "run-x", "forged", endpoint=where)
    problem = refused(verb, "--run-id", "forged")
    assert (problem["kind"], problem["message"]) == (
        "control_unreachable",
        f"cannot {verb} run `forged`: the registry entry contains an invalid control endpoint",
    )
    with pytest.raises(BlockingIOError):
        listener.accept()  # nobody knocked
    report = run_cli(verb if verb != "attest" else "inspect", "--all")
    assert report.returncode == 103
    listener.close()
    os.close(held)


def test_wait_all_timeout_counts_the_outstanding_runs(runs):  # noqa: F811
    runs(run_id="a")
    runs(run_id="b")
    problem = refused("wait", "--all", "--timeout", "200ms", code=112)
    assert problem["kind"] == "wait_timeout"
    assert problem["message"] == (
        "stopped waiting for all runs after 200ms: 2 snapshot runs still outstanding — all of them are still "
        "live and were left running — raise or drop `--timeout` to keep waiting"
    )


def test_wait_all_timeout_says_when_an_outstanding_run_could_not_be_probed(runs, isolated_registry):  # noqa: F811
    """A snapshot entry that turns unprobeable is never read as finished, nor as live."""
    runs(run_id="a")
    (lock,) = [name for name in os.listdir(isolated_registry) if name.endswith(".lock")]
    # The waiter saw the run live; then its lock is replaced by a symlink (unprobeable).
    waiter = start_waiter("--all", "--timeout", "1500ms", "--error-format", "json")
    os.rename(isolated_registry / lock, isolated_registry / "held-elsewhere.lock")
    os.symlink(isolated_registry / "held-elsewhere.lock", isolated_registry / lock)
    _, err = waiter.communicate(timeout=SAFETY_NET)
    assert waiter.returncode == 112, err
    message = json.loads(err.decode().splitlines()[-1])["message"]
    assert message.startswith("stopped waiting for all runs after 1500ms: 1 snapshot run still outstanding — ")
    assert "not confirmed finished" in message and "still live" not in message


def test_wait_for_one_run_says_it_is_still_live(runs):  # noqa: F811
    runs(run_id="w")
    problem = refused("wait", "--run-id", "w", "--timeout", "200ms", code=112)
    assert problem["message"] == (
        "stopped waiting for run `w` after 200ms: it is still live and was left running — raise or drop "
        "`--timeout` to keep waiting"
    )
    bare = refused("wait", "--run-id", "w", "--timeout", "1", code=112)  # a bare number is seconds: said so
    assert bare["message"].startswith("stopped waiting for run `w` after 1s: "), bare


def test_a_fan_out_reports_a_broken_endpoint_per_target_and_counts_the_failures(runs, isolated_registry):  # noqa: F811
    reachable = runs(run_id="reachable-run")
    runs(run_id="unreachable-run")
    for name in os.listdir(isolated_registry):
        if name.endswith(".json"):
            path = isolated_registry / name
            record = json.loads(path.read_text())
            if record["run_id"] == "unreachable-run":
                record["endpoint"] = "not-a-control-endpoint"
                path.write_text(json.dumps(record))
    proc = run_cli("cancel", "--all")
    assert proc.returncode == 103
    report = {entry["run_id"]: entry for entry in json.loads(proc.stdout)}
    assert report["reachable-run"]["status"] == "accepted"
    assert report["unreachable-run"]["error"] == (
        "cannot cancel run `unreachable-run`: the registry entry contains an invalid control endpoint"
    )
    assert b"cancel --all: 1 of 2 target run(s) could not be reached or did not acknowledge the cancel" in proc.stderr
    assert reachable.finish() == 108


@pytest.mark.parametrize("verb", ["inspect", "cancel", "kill"])
def test_an_all_targets_failure_is_the_by_id_clients_sentence(isolated_registry, verb):
    """A live run that publishes no endpoint fails its `--all` target in the reference's
    per-target words, the sentence a by-id client says (``cannot cancel run `x`: the run is
    live but exposes no control endpoint``), not words of its own."""
    isolated_registry.mkdir(exist_ok=True)
    held = _entry(isolated_registry, "run-a", "mute")
    try:
        proc = run_cli(verb, "--all", *(["--json"] if verb == "inspect" else []))  # cancel and kill print JSON
    finally:
        os.close(held)
    assert proc.returncode == 103, proc.stderr
    [outcome] = json.loads(proc.stdout)
    said = f"cannot {verb} run `mute`: the run is live but exposes no control endpoint"
    assert (outcome["status"], outcome["error"]) == ("failed", said)
