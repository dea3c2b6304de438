"""A batch's host state (issue 26): one directory per batch, on a tmpfs when one is usable, in
which every job's socket, registry record and tombstone live; the registry holds one record
of the batch's that delegates to it (``batch_records``), and readers follow it only into this
user's private run directory.

Process-level: the real CLI, real children, a second OS user when running as root.
"""

from __future__ import annotations

import fcntl
import glob
import json
import os
import shutil
import time

import pytest

from processkit import rundir

from conftest import (
    SAFETY_NET,
    listed_when,
    pid_alive,
    published_late_by,
    read_events,
    run_cli,
    start_cli,
    wait_for_event,
    wait_for_file,
)
from control_support import registry_record, start_waiter
from run_groups import groups_of
from streams import PY, one
from test_batch import start_batch, write_manifest  # noqa: F401 - the fixture
from test_other_users import other_user  # noqa: F401 - the fixture

BATCH_FAILED = 117
WAITER = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.01)\nsys.exit(int(sys.argv[2]))"


def listed() -> dict[str, dict]:
    proc = run_cli("list", "--json")
    assert proc.returncode == 0, proc.stderr
    return {run["run_id"]: run for run in map(json.loads, proc.stdout.splitlines())}


def outcome(run_id: str) -> dict:
    proc = run_cli("wait", "--run-id", run_id, "--report-outcome", "--timeout", "20s")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def batch_dirs(pid: int) -> list[str]:
    return [path for base in rundir.bases() for path in glob.glob(f"{base}/pkc-{pid}-*")]


def test_a_live_job_is_found_by_every_client_and_its_record_is_the_batchs(tmp_path, isolated_registry, start_batch):
    release = tmp_path / "release"
    jobs = [
        {"args": ["sh", "-c", "exit 5"], "id": "quick", "run_id": "lodged-quick"},
        {"args": [PY, "-c", WAITER, str(release), "3"], "id": "slow", "run_id": "lodged-slow"},
        {"args": [PY, "-c", WAITER, str(release), "0"], "id": "victim", "run_id": "lodged-victim"},
    ]
    out = tmp_path / "out"
    batch = start_batch(write_manifest(tmp_path / "m.jsonl", jobs), "--out", str(out), "--jobs", "3")
    for name in ("slow", "victim"):
        wait_for_event(out / name / "events.jsonl", "run_started")
    wait_for_event(out / "quick" / "events.jsonl", "runner_exit")
    runs = listed()
    assert {"lodged-slow", "lodged-victim"} <= set(runs)
    assert runs["lodged-slow"]["health"] == "live" and runs["lodged-slow"]["labels"]["batch"]
    endpoint = runs["lodged-slow"]["endpoint"]
    home = os.path.dirname(endpoint)
    assert os.path.dirname(home) == rundir.batch_base() and endpoint != runs["lodged-victim"]["endpoint"]
    # Its record is in the batch's directory; the registry holds the batch's one record.
    records = [name for name in os.listdir(isolated_registry) if name.endswith(".json")]
    assert len(records) == 1
    delegating = json.loads((isolated_registry / records[0]).read_text())
    assert delegating["batch_records"] == home and delegating["endpoint"] is None
    assert delegating["run_id"] not in runs, "the batch's own record stands for its jobs in list"
    assert len([name for name in os.listdir(home) if name.endswith(".json")]) == 2
    # The job that already ended is reported from its tombstone in the batch's directory.
    assert outcome("lodged-quick")["code"] == 5
    assert run_cli("inspect", "--run-id", "lodged-slow").returncode == 0
    assert b"run_started" in run_cli("events", "--run-id", "lodged-slow", "--json").stdout
    inspected = run_cli("inspect", "--all", "--json")
    assert {snapshot["run_id"] for snapshot in json.loads(inspected.stdout)} == {"lodged-slow", "lodged-victim"}
    assert run_cli("cancel", "--run-id", "lodged-victim").returncode == 0
    waiter = start_cli("wait", "--run-id", "lodged-slow", "--report-outcome")
    wait_for_event(out / "victim" / "events.jsonl", "runner_exit")
    release.touch()
    waited, err = waiter.communicate(timeout=SAFETY_NET)
    assert waiter.returncode == 0, err
    assert json.loads(waited)["code"] == 3
    _, _ = batch.communicate(timeout=SAFETY_NET)
    assert batch.returncode == BATCH_FAILED
    assert (outcome("lodged-victim")["code"], outcome("lodged-victim")["source"]) == (108, "control_cancel")
    assert outcome("lodged-quick")["code"] == 5, "remembered in the registry once the batch ended"
    assert batch_dirs(batch.pid) == [] and not os.path.exists(home)
    assert [name for name in os.listdir(isolated_registry) if not name.endswith((".ended", ".outcomes"))] == []


def test_a_keep_failed_job_is_published_once_it_has_lasted(tmp_path, isolated_registry, start_batch, late_publication):
    """``--keep failed``: a job that ends within ``LATE_PUBLICATION_MS`` makes no record, socket
    or tombstone; one that lasts is listed (its record saying when it started, not when it was
    published) and cancelled as any run is."""
    release = tmp_path / "release"
    jobs = [
        {"args": ["true"], "id": "quick", "run_id": "late-quick"},
        {"args": [PY, "-c", WAITER, str(release), "3"], "id": "slow", "run_id": "late-slow"},
        {"args": [PY, "-c", WAITER, str(release), "0"], "id": "victim", "run_id": "late-victim"},
    ]
    out = tmp_path / "out"
    batch = start_batch(
        write_manifest(tmp_path / "m.jsonl", jobs), "--out", str(out), "--jobs", "3", "--keep", "failed"
    )
    runs = listed_when(lambda runs: {"late-slow", "late-victim"} <= set(runs))
    home = os.path.dirname(runs["late-slow"]["endpoint"])
    wait_for_file(out / "summary.jsonl")
    deadline = time.monotonic() + SAFETY_NET
    while b'"quick"' not in (out / "summary.jsonl").read_bytes():
        assert time.monotonic() < deadline, "the quick job's summary line did not come"
        time.sleep(0.02)
    assert "late-quick" not in listed()
    made = sorted(os.listdir(home))
    assert [name for name in made if name.endswith(".ended")] == [], made
    assert len([name for name in made if name.endswith(".json")]) == 2, made
    for name in (name for name in made if name.endswith(".json")):
        assert published_late_by(os.path.join(home, name)) >= late_publication, "the record keeps the spawn's time"
    assert run_cli("cancel", "--run-id", "late-victim").returncode == 0
    wait_for_file(out / "victim" / "events.jsonl")
    release.touch()
    _, _ = batch.communicate(timeout=SAFETY_NET)
    assert batch.returncode == BATCH_FAILED
    assert (outcome("late-victim")["code"], outcome("late-victim")["source"]) == (108, "control_cancel")
    assert outcome("late-slow")["code"] == 3
    assert not (out / "quick").exists(), "a passing job keeps only its summary line"


LOOK = """import json, os, sys
registry, out = sys.argv[1], sys.argv[2]
mine = [path for base in ("/tmp", "/var/tmp") for path in os.listdir(base) if path.startswith(f"pkc-{os.getppid()}-")]
with open(out, "w") as handle:
    json.dump({"registry": sorted(os.listdir(registry)), "temp": mine}, handle)
"""


def test_no_file_is_made_in_the_registry_or_the_temp_dir_per_job(tmp_path, isolated_registry):
    """Each of 50 jobs looks at the registry and the temp dir while its own run is published."""
    seen = tmp_path / "seen"
    seen.mkdir()
    jobs = [{"args": [PY, "-c", LOOK, str(isolated_registry), str(seen / f"{n}")], "id": f"j{n}"} for n in range(50)]
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", str(tmp_path / "out"), "--jobs", "2")
    assert proc.returncode == 0, proc.stderr
    looks = [json.loads((seen / f"{n}").read_text()) for n in range(50)]
    assert all(look["temp"] == [] for look in looks), looks[0]
    first = looks[0]["registry"]
    assert [name.rsplit(".", 1)[1] for name in first] == ["json", "lock"], first  # the batch's record
    assert all(look["registry"] == first for look in looks), "a job's registration touched the registry"
    after = sorted(os.listdir(isolated_registry))
    assert len(after) == 1 and after[0].endswith(".outcomes"), after


@pytest.mark.parametrize("mechanism", ["cgroup_v2", "process_group", "process_group_alone"])
def test_a_sigkilled_batch_leaves_nothing_after_prune(tmp_path, isolated_registry, start_batch, monkeypatch, mechanism):
    """``process_group_alone``: no v1 group either, so each job's recorded process group is the
    only way to its processes. The batch's directory is where no other worker's prune looks first."""
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    if mechanism != "cgroup_v2":
        monkeypatch.setenv("PROCESSKIT_CONTAINMENT", "process_group")
    if mechanism == "process_group_alone":
        monkeypatch.setenv("PROCESSKIT_CGROUP_V1_ROOT", str(tmp_path / "no-v1"))
    jobs = [
        {
            "args": [
                "sh",
                "-c",
                f"sleep 30 & echo $! > {tmp_path}/s{n}.tmp; mv {tmp_path}/s{n}.tmp {tmp_path}/s{n}.pid; wait",
            ],
            "id": f"s{n}",
        }
        for n in range(3)
    ]
    out = tmp_path / "out"
    batch = start_batch(write_manifest(tmp_path / "m.jsonl", jobs), "--out", str(out), "--jobs", "2")
    for n in (0, 1):
        wait_for_event(out / f"s{n}" / "events.jsonl", "run_started")
    roots = [one(read_events(out / f"s{n}" / "events.jsonl"), "run_started")["root_pid"] for n in (0, 1)]
    for n in (0, 1):
        wait_for_file(tmp_path / f"s{n}.pid")
    roots += [int((tmp_path / f"s{n}.pid").read_text()) for n in (0, 1)]
    groups = groups_of(batch.pid)
    batch.kill()
    batch.communicate(timeout=SAFETY_NET)
    assert batch_dirs(batch.pid), "the killed batch left nothing: the test shows nothing"
    assert any(run["health"] == "stale" for run in listed().values()), "the stale delegating record is listed"
    proc = run_cli("prune", "--json", "--report-reaped")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["pruned"] == 1
    assert batch_dirs(batch.pid) == [], proc.stdout
    assert [name for name in os.listdir(isolated_registry) if not name.endswith(".ended")] == []
    assert not any(os.path.exists(group) for group in groups)
    assert groups_of(batch.pid) == []
    assert not any(pid_alive(pid) for pid in roots)
    assert listed() == {}


def fake_batch(registry, home: str, run_id: str):
    """A batch's delegating record and one job record in ``home``, both locks held by this test
    (so both read as live); returns the held descriptors."""
    registry.chmod(0o700)
    stem = f"run-{time.time_ns():032x}-{0:016x}"
    held = []
    for lock in (registry / f"{stem}.lock", os.path.join(home, "live.lock")):
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        held.append(fd)
    record = registry_record("fake-batch", f"{stem}.lock", started_at="2026-01-01T00:00:00.000Z", hint="batch")
    job = dict(record, run_id=run_id, liveness={"kind": "advisory_lock", "lock_file": "live.lock"})
    with open(os.path.join(home, "j00000001.json"), "w") as handle:
        json.dump(job, handle)
    (registry / f"{stem}.json").write_text(json.dumps(dict(record, batch_records=home)))
    return held


@pytest.mark.parametrize("trap", ["none", "symlink", "world-writable", "other-user"])
def test_a_delegation_is_followed_only_into_this_users_private_directory(tmp_path, isolated_registry, trap, request):
    base = rundir.batch_base()
    token = f"{os.getpid()}-{time.time_ns():x}-0"
    real = os.path.join(base, f"pkc-{token}")
    os.mkdir(real, 0o700)
    home = real
    if trap == "symlink":
        home = os.path.join(base, f"pkc-{os.getpid()}-{time.time_ns():x}-1")
        os.symlink(real, home)
    held = fake_batch(isolated_registry, real, "fake-job")
    try:
        if trap == "world-writable":
            os.chmod(real, 0o777)
        elif trap == "other-user":
            user = request.getfixturevalue("other_user")
            os.chown(real, user.pw_uid, user.pw_gid)
        if home != real:
            record = next(isolated_registry.glob("*.json"))
            record.write_text(json.dumps(dict(json.loads(record.read_text()), batch_records=home)))
        runs = listed()
        if trap == "none":
            assert set(runs) == {"fake-job"}, "a sound delegation is followed (else this test shows nothing)"
            assert run_cli("wait", "--run-id", "fake-job", "--timeout", "100ms").returncode == 112
        else:
            assert set(runs) == {"fake-batch"}, runs  # read as the record it is, its jobs unread
            assert runs["fake-batch"]["endpoint"] is None
            assert run_cli("wait", "--run-id", "fake-job", "--timeout", "100ms").returncode == 0
    finally:
        for fd in held:
            os.close(fd)
        if home != real:
            os.unlink(home)
        shutil.rmtree(real)


SHOW_HOME = "import os, sys\nprint(*sorted(n for n in os.listdir(sys.argv[1]) if n.startswith(f'pkc-{os.getppid()}-')))"


@pytest.mark.parametrize("mode, lodged", [(0o700, True), (0o755, False)])
def test_the_batch_lodges_in_xdg_runtime_dir_only_when_it_is_private(tmp_path, monkeypatch, mode, lodged):
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    runtime.chmod(mode)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    out = tmp_path / "out"
    jobs = [{"args": [PY, "-c", SHOW_HOME, str(runtime)], "id": "show"}]
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    shown = (out / "show" / "capture" / "stdout.log").read_text().split()
    assert len(shown) == (1 if lodged else 0), shown
    assert [name for name in os.listdir(runtime) if name.startswith("pkc-")] == []


def test_a_shared_sticky_registry_leaves_a_run_published_late_unregistered(tmp_path, monkeypatch):
    """A bench run and a ``--keep failed`` job publish late; a sticky registry (a shared place by
    design) is never adopted, so they warn and run unregistered, as every run does (the
    reference's §2.1 warn-and-run)."""
    registry = tmp_path / "registry"
    registry.mkdir()
    registry.chmod(0o1777)
    monkeypatch.setenv("PROCESSKIT_CLI_REGISTRY_DIR", str(registry))
    out = tmp_path / "out"
    proc = run_cli(
        "batch", write_manifest(tmp_path / "m.jsonl", [{"args": ["true"]}]), "--out", out, "--keep", "failed"
    )
    assert proc.returncode == 0, proc.stderr
    (line,) = map(json.loads, (out / "summary.jsonl").read_text().splitlines())
    assert line["exit_code"] == 0
    bench = run_cli("bench", "--runs", "3", "--", "true", cwd=tmp_path)
    assert bench.returncode == 0, bench.stderr
    assert os.listdir(registry) == [] and registry.stat().st_mode & 0o7777 == 0o1777


def test_a_passing_job_under_keep_failed_reports_its_outcome_to_a_wait_that_saw_it_live(
    tmp_path, isolated_registry, start_batch
):
    """A ``--keep failed`` job's record names ``<out>/<id>/events.jsonl``, written only for a job
    that fails: a passing job's outcome is its tombstone's (the reference has no batch), for
    ``wait --run-id``, ``wait --all`` and an attached API handle that saw it live."""
    import processkit

    release = tmp_path / "release"
    jobs = [
        {"args": [PY, "-c", WAITER, str(release), "0"], "id": "pass", "run_id": "kept-pass"},
        {"args": [PY, "-c", WAITER, str(release), "3"], "id": "fail", "run_id": "kept-fail"},
    ]
    out = tmp_path / "out"
    batch = start_batch(
        write_manifest(tmp_path / "m.jsonl", jobs), "--out", str(out), "--jobs", "2", "--keep", "failed"
    )
    label = listed_when(lambda runs: {"kept-pass", "kept-fail"} <= set(runs))["kept-pass"]["labels"]["batch"]
    waiters = [start_waiter(*args, "--report-outcome") for args in (("--run-id", "kept-pass"), ("--all",))]
    handle = processkit.attach("kept-pass")
    assert handle.poll() is None  # its watch saw the job live
    release.touch()
    batch.communicate(timeout=SAFETY_NET)
    assert batch.returncode == BATCH_FAILED
    answers = []
    for waiter in waiters:
        got, err = waiter.communicate(timeout=SAFETY_NET)
        assert waiter.returncode == 0, err
        answers.append(json.loads(got))
    passed = {"run_id": "kept-pass", "status": "reported", "code": 0, "source": "child_exit", "child_code": 0}
    failed = {"run_id": "kept-fail", "status": "reported", "code": 3, "source": "child_exit", "child_code": 3}
    batch_own = {"run_id": label, "status": "unknown", "code": None, "source": None, "child_code": None}
    assert answers == [passed, [batch_own, failed, passed]]  # --all waits for the batch's record too
    assert handle.wait(timeout=SAFETY_NET) == 0
    assert not (out / "pass").exists(), "the passing job's stream was never written"
