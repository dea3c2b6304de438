"""The per-user registry end to end: where it lives, what a run writes, how clients read
health, what wait and prune do with live, stale and unprobed entries."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess

import pytest

from conftest import REFERENCE_SCHEMAS, registry_entries, require_reference_schemas, run_cli, start_cli
from control_support import (  # noqa: F401
    check_schema,
    cli_json,
    envelope,
    listed,
    mode,
    runs,
    start_waiter,
)
from control_support import registry_record as _record
from own_tmp import own_tmp  # noqa: F401


def _write(registry, stem: str, document, *, lock: bool = True) -> None:
    data = document if isinstance(document, bytes) else json.dumps(document).encode()
    (registry / f"{stem}.json").write_bytes(data)
    if lock:
        (registry / f"{stem}.lock").touch()


def _hold(registry, stem: str) -> int:
    """Play a live runner: hold the entry's lock from this process."""
    fd = os.open(registry / f"{stem}.lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def test_reference_schemas_accept_their_own_samples():
    require_reference_schemas()
    for name in ("list", "inspect", "control-ack", "attest", "prune", "wait", "error"):
        for line in (REFERENCE_SCHEMAS / f"{name}.sample.jsonl").read_text().splitlines():
            check_schema(name, json.loads(line))


def test_a_run_registers_before_its_child_and_unregisters_at_its_end(runs, isolated_registry, tmp_path):
    run = runs(run_id="build-42", labels=("lane=a", "pipeline=ci"), options=("--capture-dir", "cap"), cwd=tmp_path)
    assert mode(isolated_registry) == 0o700
    (record_name,) = [n for n in os.listdir(isolated_registry) if n.endswith(".json")]
    stem = record_name[: -len(".json")]
    assert sorted(os.listdir(isolated_registry)) == [f"{stem}.json", f"{stem}.lock"]
    record = json.loads((isolated_registry / record_name).read_text())
    assert list(record) == [
        "registry_version",
        "run_id",
        "endpoint",
        "started_at",
        "argv_sha256",
        "hint",
        "labels",
        "jsonl",
        "capture_dir",
        "liveness",
    ]
    assert record["liveness"] == {"kind": "advisory_lock", "lock_file": f"{stem}.lock"}
    assert record["argv_sha256"] == run.started["command"]["argv_sha256"]
    assert "sleep" not in json.dumps(record)  # raw argv is never stored

    (row,) = listed()
    assert (row["run_id"], row["health"], row["labels"]) == ("build-42", "live", {"lane": "a", "pipeline": "ci"})
    assert (row["jsonl"], row["capture_dir"]) == (str(run.jsonl), str(tmp_path / "cap"))  # made absolute
    assert row["endpoint"] == record["endpoint"]
    assert listed("--health", "stale") == [] and listed("--label", "lane=b") == []
    assert len(listed("--label", "lane=a", "--label", "pipeline=ci", "--health", "live")) == 1

    human = run_cli("list")
    header, line = human.stdout.decode().splitlines()
    assert header.split() == [
        "RUN_ID",
        "HEALTH",
        "STARTED_AT",
        "HINT",
        "ARGV_SHA256",
        "LABELS",
        "JSONL",
        "CAPTURE_DIR",
        "ENDPOINT",
    ]
    assert line.split()[:2] == ["build-42", "live"]
    assert record["argv_sha256"][:12] + "..." in line and "lane=a,pipeline=ci" in line

    cli_json("cancel", "--run-id", "build-42")
    assert run.finish() == 108
    assert registry_entries(isolated_registry) == []
    assert run_cli("list").stdout == b"no runs registered\n"


def test_concurrent_pruners_count_only_what_each_removed(isolated_registry):
    """Pruners racing over the same stale entries: an entry another pruner removed between this
    one's scan and its unlink is not this one's, so the tallies add up to what was planted."""
    planted = 300  # enough that the passes overlap: before the fix they counted up to ~2x this
    for _ in range(2):  # two storms, as one may happen to run its pruners one after another
        for n in range(planted):
            _write(isolated_registry, f"run-{n}", _record(f"dead{n}", f"run-{n}.lock"))
        pruners = [start_cli("prune", "--json") for _ in range(3)]
        tallies = [json.loads(p.communicate(timeout=60)[0]) for p in pruners]
        assert sum(t["pruned"] for t in tallies) == planted, tallies
        assert registry_entries(isolated_registry) == []


def test_a_stale_entry_whose_unlink_fails_is_still_counted_as_the_dry_run_promised(isolated_registry):
    """Only an entry already gone is another pruner's: one that cannot go (immutable here) is
    counted, as the reference counts it, so the real pass says what its dry run said."""
    _write(isolated_registry, "run-x", _record("deadx", "run-x.lock"))
    stuck = isolated_registry / "run-x.json"
    if subprocess.run(["chattr", "+i", stuck], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here (needs root and a filesystem that keeps the flag)")
    try:
        assert json.loads(run_cli("prune", "--dry-run", "--json").stdout)["pruned"] == 1
        done = run_cli("prune", "--json")
        assert json.loads(done.stdout)["pruned"] == 1, done.stdout
        assert "no stale entries" not in run_cli("prune").stdout.decode()
    finally:
        subprocess.run(["chattr", "-i", stuck], check=True)


def test_a_killed_runner_leaves_a_stale_entry_that_clients_refuse_and_prune_reaps(
    own_tmp, runs, isolated_registry, monkeypatch
):
    """The runs see a /tmp of their own (``own_tmp``): another same-user sweep of the host's /tmp
    would otherwise remove the dead runner's socket directory before this test's prune does."""
    monkeypatch.setenv("PROCESSKIT_CONTAINMENT", "process_group")  # a dead runner leaves no cgroup behind
    victim = runs(run_id="victim")
    survivor = runs(run_id="survivor")
    socket_dir = os.path.dirname([r for r in listed() if r["run_id"] == "victim"][0]["endpoint"])
    victim.proc.send_signal(signal.SIGKILL)
    assert victim.finish() == -signal.SIGKILL
    assert {r["run_id"]: r["health"] for r in listed()} == {"survivor": "live", "victim": "stale"}
    assert [r["run_id"] for r in listed("--health", "stale")] == ["victim"]

    for verb in ("inspect", "cancel", "kill", "attest"):
        proc = run_cli("--error-format", "json", verb, "--run-id", "victim")
        assert (proc.returncode, proc.stdout) == (103, b"")
        assert envelope(proc)["kind"] == "stale"
    assert run_cli("wait", "--run-id", "victim", "--timeout", "5s").returncode == 0  # stale counts as ended
    assert [r["run_id"] for r in cli_json("inspect", "--all", "--json")] == ["survivor"]

    dry = cli_json("prune", "--dry-run", "--json")
    check_schema("prune", dry)
    assert dry == {
        "pruned": 1,
        "live": 1,
        "unprobed": 0,
        "orphaned_locks": 0,
        "candidates": [
            {
                "kind": "entry",
                "run_id": "victim",
                "started_at": dry["candidates"][0]["started_at"],
                "socket_dir": socket_dir,
            }
        ],
    }
    assert os.path.exists(own_tmp.outside(os.path.join(socket_dir, "c.sock")))
    assert len(os.listdir(isolated_registry)) == 4
    human = run_cli("prune", "--dry-run").stdout.decode().splitlines()
    assert human[0].startswith("would prune entry run_id=victim started_at=") and human[0].endswith(
        f"socket_dir={socket_dir}"
    )
    assert human[1] == "would prune 1 stale (0 orphaned locks), keep 1 live, leave 0 unprobeable"

    tally = cli_json("prune", "--json")
    check_schema("prune", tally)
    assert tally == {"pruned": 1, "live": 1, "unprobed": 0, "orphaned_locks": 0}
    assert not os.path.exists(own_tmp.outside(socket_dir))
    assert [r["run_id"] for r in listed()] == ["survivor"] and len(os.listdir(isolated_registry)) == 2
    assert cli_json("inspect", "--run-id", "survivor", "--json")["run_id"] == "survivor"
    # (further lines may report leftovers of other runners on this host: not this test's)
    assert (
        run_cli("prune").stdout.splitlines()[0] == b"pruned 0 stale (0 orphaned locks), kept 1 live, left 0 unprobeable"
    )
    assert survivor.proc.poll() is None


def test_wait_blocks_times_out_and_reports_the_outcome(runs, tmp_path):
    trigger = tmp_path / "trigger"
    runs("sh", "-c", f'while [ ! -e "{trigger}" ]; do sleep 0.02; done; exit 7', run_id="w")
    timed_out = run_cli("--error-format", "json", "wait", "--run-id", "w", "--timeout", "300ms")
    assert timed_out.returncode == 112 and timed_out.stdout == b""
    problem = envelope(timed_out)
    assert (problem["kind"], problem["run_id"], problem["retryable"]) == ("wait_timeout", "w", True)

    waiter = start_waiter("--run-id", "w", "--report-outcome")
    assert waiter.poll() is None
    trigger.touch()
    out, err = waiter.communicate(timeout=60)
    assert waiter.returncode == 0, err
    outcome = json.loads(out)
    check_schema("wait", outcome)
    assert outcome == {"run_id": "w", "status": "reported", "code": 7, "source": "child_exit", "child_code": 7}

    gone = cli_json("wait", "--run-id", "typo", "--report-outcome")
    assert gone == {"run_id": "typo", "status": "unknown", "code": None, "source": None, "child_code": None}
    assert cli_json("wait", "--all", "--report-outcome") == []
    assert run_cli("wait", "--run-id", "w", "--timeout", "0").returncode == 100
    assert run_cli("wait", "--timeout", "1s").returncode == 100


def test_hand_written_records_are_checked_field_by_field(isolated_registry):
    held = []
    _write(
        isolated_registry,
        "run-a",
        _record(
            "ok",
            "run-a.lock",
            argv_sha256="A" * 64,
            hint="Not-A-Hint",
            labels={"lane": "a", "bad key": "x", "ctl": "a\u0007b"},
        ),
    )
    held.append(_hold(isolated_registry, "run-a"))
    _write(isolated_registry, "run-b", _record("twin", "run-b.lock", argv_sha256="ab" * 32, hint="msbuild_node_reuse"))
    _write(isolated_registry, "run-c", _record("twin", "run-c.lock"))
    held += [_hold(isolated_registry, "run-b"), _hold(isolated_registry, "run-c")]
    _write(isolated_registry, "run-d", _record("dead", "run-d.lock"))  # lock free: stale
    _write(isolated_registry, "run-e", _record("nolock", "run-e.lock"), lock=False)  # lock missing: stale
    _write(isolated_registry, "run-f", _record("linked", "run-f.lock"), lock=False)
    os.symlink(isolated_registry / "run-d.lock", isolated_registry / "run-f.lock")  # O_NOFOLLOW: unprobed
    skipped = {
        "v2": _record("v2", "v2.lock", registry_version=2),
        "escape": _record("escape", "../escape.lock"),
        "device": _record("device", "CON.lock"),
        "date": _record("date", "date.lock", started_at="2026-02-30T21:00:00.000Z"),
        "kind": _record("kind", "kind.lock", liveness={"kind": "pid", "lock_file": "kind.lock"}),
        "huge": _record("huge", "huge.lock", padding="x" * 70_000),
    }
    for stem, document in skipped.items():
        _write(isolated_registry, stem, document)
    _write(isolated_registry, "garbage", b"\xff{not json")

    everything = listed()
    assert [r["run_id"] for r in everything] == ["dead", "linked", "nolock", "ok", "twin", "twin"]
    assert [r["run_id"] for r in listed("--health", "live")] == ["ok", "twin", "twin"]
    rows = {r["run_id"]: r for r in everything}
    ok = rows["ok"]
    assert (ok["argv_sha256"], ok["hint"], ok["labels"]) == (None, None, {"lane": "a"})
    twins = [(r["argv_sha256"], r["hint"]) for r in everything if r["run_id"] == "twin"]
    assert set(twins) == {(None, None), ("ab" * 32, "msbuild_node_reuse")}
    assert {name: rows[name]["health"] for name in ("dead", "nolock", "linked")} == {
        "dead": "stale",
        "nolock": "stale",
        "linked": "unprobed",
    }

    def refused(*args) -> dict:
        proc = run_cli("--error-format", "json", *args)
        assert proc.returncode == 103, proc.stderr
        return envelope(proc)

    assert refused("inspect", "--run-id", "twin")["kind"] == "ambiguous_run_id"
    assert refused("wait", "--run-id", "twin")["kind"] == "ambiguous_run_id"
    problem = refused("inspect", "--run-id", "linked")
    assert (problem["kind"], problem["retryable"]) == ("unprobed", True)
    assert refused("cancel", "--run-id", "ok")["kind"] == "control_unreachable"  # no endpoint published
    report = run_cli("cancel", "--all", "--label", "lane=a")
    assert report.returncode == 103
    (entry,) = json.loads(report.stdout)
    check_schema("control-ack", [entry])
    assert (entry["run_id"], entry["status"], entry["accepted"]) == ("ok", "failed", False) and entry["error"]

    old = isolated_registry / "orphan-old.lock"
    old.touch()
    os.utime(old, (0, 0))
    (isolated_registry / "orphan-new.lock").touch()
    assert cli_json("prune", "--json", "--label", "lane=zzz") == {
        "pruned": 0,
        "live": 0,
        "unprobed": 0,
        "orphaned_locks": 0,
    }
    assert cli_json("prune", "--json") == {"pruned": 2, "live": 3, "unprobed": 1, "orphaned_locks": 1}
    left = set(os.listdir(isolated_registry))
    assert not {"run-d.json", "run-d.lock", "run-e.json", "orphan-old.lock"} & left
    assert {"run-f.json", "run-f.lock", "orphan-new.lock", "garbage.json"} <= left
    assert {f"{stem}.json" for stem in skipped} <= left  # unreadable records are never deleted
    for fd in held:
        os.close(fd)


def test_a_record_whose_run_id_no_new_run_could_take_is_still_a_run(isolated_registry):
    """As the reference, a record's run id is any string, kept exact: one with terminal controls,
    over 256 characters or empty is listed, pruned when stale and targeted by --all when live;
    only what a person reads is cleaned. A lock name with a format character is a lock name."""
    hostile, long_stale = "a\x1b[31mb\nc\u202e", "z\x07" * 200
    _write(isolated_registry, "run-h", _record(hostile, "run-h.lock", labels={"lane": "h"}))
    _write(isolated_registry, "run-f", _record("fmt", "run-\u200bf.lock"), lock=False)
    (isolated_registry / "run-\u200bf.lock").touch()
    held = [_hold(isolated_registry, "run-h"), os.open(isolated_registry / "run-\u200bf.lock", os.O_RDWR)]
    fcntl.flock(held[1], fcntl.LOCK_EX | fcntl.LOCK_NB)
    _write(isolated_registry, "run-l", _record(long_stale, "run-l.lock"))  # lock free: stale
    _write(isolated_registry, "run-e", _record("", "run-e.lock"))

    assert [(r["run_id"], r["health"]) for r in listed()] == [
        ("", "stale"),
        (hostile, "live"),
        ("fmt", "live"),
        (long_stale, "stale"),
    ]
    shown = run_cli("list")
    assert shown.returncode == 0 and "a [31mb c " in shown.stdout.decode(), shown.stdout
    assert not set(shown.stdout.decode()) & {"\x1b", "\x07", "\u202e"}

    report = run_cli("cancel", "--all", "--label", "lane=h")
    assert report.returncode == 103, report.stderr  # found, and it publishes no endpoint
    assert [(e["run_id"], e["status"]) for e in json.loads(report.stdout)] == [(hostile, "failed")]
    inspected = run_cli("inspect", "--all", "--json")
    assert sorted(e["run_id"] for e in json.loads(inspected.stdout)) == [hostile, "fmt"], inspected.stderr
    human = run_cli("inspect", "--all")
    assert human.returncode == 103 and "a [31mb c " in human.stdout.decode(), human.stdout
    waited = run_cli("--error-format", "json", "wait", "--all", "--label", "lane=h", "--timeout", "10ms")
    assert envelope(waited)["kind"] == "wait_timeout"  # the live run is waited for, not passed over

    dry = run_cli("prune", "--dry-run")
    assert dry.returncode == 0 and "would prune 2 stale" in dry.stdout.decode(), dry.stdout
    assert "\x07" not in dry.stdout.decode() and "run_id=z z z " in dry.stdout.decode()
    assert cli_json("prune", "--json") == {"pruned": 2, "live": 2, "unprobed": 0, "orphaned_locks": 0}
    assert registry_entries(isolated_registry) == ["run-f.json", "run-h.json", "run-h.lock", "run-\u200bf.lock"]
    for fd in held:
        os.close(fd)


def test_an_unreadable_registry_fails_whole_registry_commands_with_111(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("PROCESSKIT_CLI_REGISTRY_DIR", str(blocker))
    for args in (
        ("list",),
        ("prune",),
        ("wait", "--all"),
        ("wait", "--run-id", "x"),
        ("cancel", "--all"),
        ("inspect", "--all"),
    ):
        proc = run_cli("--error-format", "json", *args)
        assert proc.returncode == 111, (args, proc.stderr)
        problem = envelope(proc)
        assert problem["kind"] == "registry"
    proc = run_cli("--error-format", "json", "inspect", "--run-id", "x")
    assert proc.returncode == 103
    assert (envelope(proc)["kind"], envelope(proc)["run_id"]) == ("registry", "x")


def test_a_missing_registry_is_empty_and_clients_never_create_it(tmp_path, monkeypatch):
    missing = tmp_path / "nowhere" / "runs"
    monkeypatch.setenv("PROCESSKIT_CLI_REGISTRY_DIR", str(missing))
    assert run_cli("list").stdout == b"no runs registered\n"
    assert cli_json("prune", "--json") == {"pruned": 0, "live": 0, "unprobed": 0, "orphaned_locks": 0}
    assert run_cli("wait", "--all").returncode == 0
    assert not missing.parent.exists()


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"XDG_RUNTIME_DIR": "{tmp}/xdg"}, "{tmp}/xdg/processkit-cli/runs"),
        ({"HOME": "{tmp}/home"}, "{tmp}/home/.local/state/processkit-cli/runs"),
    ],
)
def test_the_registry_falls_back_to_the_runtime_then_the_state_directory(tmp_path, env, expected):
    environment = {k: v for k, v in os.environ.items() if k not in ("PROCESSKIT_CLI_REGISTRY_DIR", "XDG_RUNTIME_DIR")}
    environment.update({k: v.format(tmp=tmp_path) for k, v in env.items()})
    proc = run_cli("run", "--jsonl", tmp_path / "e.jsonl", "--", "true", env=environment)
    assert proc.returncode == 0, proc.stderr
    directory = expected.format(tmp=tmp_path)
    assert os.path.isdir(directory) and mode(directory) == 0o700 and registry_entries(directory) == []
