"""``wait --report-outcome`` for a run that ended before the wait began (issue 23, item 10; an
extension listed by probe as ``wait:ended-outcome``): the runner leaves a bounded tombstone
in the registry, so the report is ``reported`` with the real code, in the reference's shape."""

from __future__ import annotations

import json
import os
import time

import pytest

from conftest import run_cli, start_cli, wait_for_event
from control_support import check_schema


def reported(run_id: str) -> dict:
    result = run_cli("wait", "--run-id", run_id, "--report-outcome")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    check_schema("wait", document)
    return document


def tombstones(registry) -> list[str]:
    return sorted(name for name in os.listdir(registry) if name.endswith(".ended"))


@pytest.mark.parametrize(
    "command, extra, outcome",
    [
        (["sh", "-c", "exit 7"], [], (7, "child_exit", 7)),
        (["sleep", "30"], ["--timeout", "200ms"], (106, "timeout", None)),
        (["/nonexistent/program"], [], (101, "spawn_error", None)),
    ],
    ids=["child-exit", "timeout", "spawn-error"],
)
def test_a_run_that_ended_before_the_wait_is_reported(tmp_path, command, extra, outcome):
    ran = run_cli("run", "--jsonl", tmp_path / "run.jsonl", "--run-id", "farm-1", *extra, "--", *command)
    assert ran.returncode == outcome[0]
    document = reported("farm-1")
    assert document == {
        "run_id": "farm-1",
        "status": "reported",
        "code": outcome[0],
        "source": outcome[1],
        "child_code": outcome[2],
    }


def test_detach_then_a_late_wait_is_not_racy(tmp_path):
    jsonl = tmp_path / "run.jsonl"
    assert (
        run_cli("run", "--detach", "--jsonl", jsonl, "--run-id", "farm-2", "--", "sh", "-c", "exit 3").returncode == 0
    )
    wait_for_event(jsonl, "runner_exit")
    os.unlink(jsonl)  # the stream is gone too: only the tombstone can tell
    assert reported("farm-2")["code"] == 3


def test_the_newest_run_of_an_id_is_reported_and_an_unknown_id_is_still_unknown(tmp_path):
    for code in (4, 5):
        run_cli("run", "--jsonl", tmp_path / "run.jsonl", "--run-id", "again", "--", "sh", "-c", f"exit {code}")
    assert reported("again")["code"] == 5
    assert reported("never-ran") == {
        "run_id": "never-ran",
        "status": "unknown",
        "code": None,
        "source": None,
        "child_code": None,
    }


def test_of_two_runs_sharing_an_id_the_one_that_ended_last_is_reported(tmp_path):
    """Two runs given one id at once, the later-started one ending first: the wait after both
    said the later start's code (4), where the id's last ending (and its only stream's
    ``runner_exit``) was the earlier start's, 3. The run that ended last is the id's last word."""
    first = start_cli(
        "run", "--jsonl", "first.jsonl", "--run-id", "twice", "--",
        "sh", "-c", "while [ ! -e go ]; do sleep 0.02; done; exit 3", cwd=tmp_path,
    )  # fmt: skip
    wait_for_event(tmp_path / "first.jsonl", "run_started")
    later = run_cli("run", "--jsonl", "later.jsonl", "--run-id", "twice", "--", "sh", "-c", "exit 4", cwd=tmp_path)
    assert later.returncode == 4, later.stderr
    (tmp_path / "go").touch()
    assert first.wait(60) == 3
    first.communicate()
    assert reported("twice")["code"] == 3


def test_tombstones_are_bounded_by_count_and_private(tmp_path, isolated_registry):
    os.chmod(isolated_registry, 0o700)
    for index in range(300):  # older than any real run: stems sort by start time
        (isolated_registry / f"run-{index:032x}-{0:016x}.ended").write_text("{}")
    assert run_cli("run", "--jsonl", tmp_path / "run.jsonl", "--run-id", "bounded", "--", "true").returncode == 0
    left = tombstones(isolated_registry)
    assert len(left) == 256
    newest = isolated_registry / left[-1]
    assert json.loads(newest.read_text())["run_id"] == "bounded"
    assert isolated_registry.stat().st_mode & 0o777 == 0o700, "in the private registry, as records are"


def test_only_every_sixteenth_tombstone_of_a_registry_lists_it_to_trim(tmp_path, isolated_registry):
    """Listing a registry of a few hundred files costs a run ~140 us, so runs count their
    tombstones in the directory's attribute and the TRIM_EVERY-th trims: the bound is kept
    (at most 15 beyond 256) without a listing per run."""
    os.chmod(isolated_registry, 0o700)
    try:
        os.setxattr(isolated_registry, "user.processkit.trim", b"14")
    except OSError:
        pytest.skip("this file system keeps no user attributes")
    for index in range(300):
        (isolated_registry / f"run-{index:032x}-{0:016x}.ended").write_text("{}")
    assert run_cli("run", "--jsonl", tmp_path / "run.jsonl", "--", "true").returncode == 0
    assert len(tombstones(isolated_registry)) == 301, "the 15th since the last trim lists nothing"
    assert os.getxattr(isolated_registry, "user.processkit.trim") == b"15"
    assert run_cli("run", "--jsonl", tmp_path / "run.jsonl", "--run-id", "sixteenth", "--", "true").returncode == 0
    left = tombstones(isolated_registry)
    assert len(left) == 256 and json.loads((isolated_registry / left[-1]).read_text())["run_id"] == "sixteenth"
    assert os.getxattr(isolated_registry, "user.processkit.trim") == b"0"


def test_prune_ages_tombstones_out(tmp_path, isolated_registry):
    assert run_cli("run", "--jsonl", tmp_path / "run.jsonl", "--run-id", "old", "--", "true").returncode == 0
    assert run_cli("run", "--jsonl", tmp_path / "run.jsonl", "--run-id", "fresh", "--", "true").returncode == 0
    old = isolated_registry / tombstones(isolated_registry)[0]
    two_days_ago = time.time() - 2 * 86400
    os.utime(old, (two_days_ago, two_days_ago))
    assert run_cli("prune", "--dry-run").returncode == 0
    assert len(tombstones(isolated_registry)) == 2
    assert run_cli("prune").returncode == 0
    assert len(tombstones(isolated_registry)) == 1
    assert reported("old")["status"] == "unknown"
    assert reported("fresh")["status"] == "reported"


def test_a_batch_keeps_its_jobs_outcomes_in_one_file_within_the_bound(tmp_path, isolated_registry):
    os.chmod(isolated_registry, 0o700)
    for index in range(300):
        (isolated_registry / f"run-{index:032x}-{0:016x}.ended").write_text("{}")
    manifest = tmp_path / "m.jsonl"
    jobs = [{"args": ["sh", "-c", f"exit {n % 3}"], "id": f"j{n}", "run_id": f"job-{n}"} for n in range(40)]
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    assert run_cli("batch", manifest, "--out", tmp_path / "out", "--jobs", "2").returncode == 117
    left = sorted(name for name in os.listdir(isolated_registry) if name.endswith((".ended", ".outcomes")))
    assert len(left) == 256  # the batch's one file counts towards the bound, and trimmed it
    assert [name for name in os.listdir(isolated_registry) if not name.endswith(".ended")] == [left[-1]]
    assert left[-1].endswith(".outcomes")
    kept = json.loads((isolated_registry / left[-1]).read_text())["outcomes"]
    assert sorted(outcome["run_id"] for outcome in kept) == sorted(f"job-{n}" for n in range(40))
    for n in (0, 1, 39):
        assert reported(f"job-{n}")["code"] == n % 3
