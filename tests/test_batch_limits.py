"""``batch --timeout`` (absolute, or relative to the median of the jobs that exited 0) and
``--memory-budget`` (admission by expected peaks). Process-level: the real CLI, real children."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from test_batch import summary, write_manifest
from streams import PY
from test_limits import FORK_LOOP, needs

BATCH_FAILED, USAGE = 117, 100


def failing_batch(tmp_path, jobs, *flags):
    """A batch of ``jobs`` that exits 117: its result and summary."""
    out = tmp_path / "out"
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", out, *flags)
    assert proc.returncode == BATCH_FAILED, proc.stderr
    return proc, summary(out)


def test_a_relative_timeout_ends_an_outlier_once_five_jobs_exited_0(tmp_path):
    """One slot, so the order is the schedule: a first job slower than the later limit is under
    none (no five yet), five quick ones set the median, then the outlier is ended at 300% of it,
    while a job as slow with its own timeout runs to its end."""
    jobs = [{"args": ["sleep", "0.5"], "id": "early"}]
    jobs += [{"args": ["true"], "id": f"quick{n}"} for n in range(5)]
    jobs += [
        {"args": ["sleep", "30"], "id": "outlier"},
        {"args": ["sleep", "0.5"], "id": "own", "timeout": "20s"},
    ]
    proc, lines = failing_batch(tmp_path, jobs, "--jobs", "1", "--timeout", "300%")
    assert (lines["outlier"]["exit_code"], lines["outlier"]["source"]) == (106, "timeout")
    assert lines["outlier"]["duration_ms"] < 10_000
    assert lines["early"]["exit_code"] == 0 and lines["own"]["exit_code"] == 0
    assert all(lines[f"quick{n}"]["exit_code"] == 0 for n in range(5))
    assert proc.stderr.decode().splitlines()[-1] == "batch: 7 of 8 jobs exited 0, 1 timed out"


def test_an_absolute_timeout_ends_every_job_but_one_with_its_own(tmp_path):
    jobs = [
        {"args": ["sleep", "30"], "id": "slow"},
        {"args": ["sleep", "1"], "id": "own", "timeout": "20s"},
        {"args": ["true"], "id": "quick"},
    ]
    _, lines = failing_batch(tmp_path, jobs, "--jobs", "3", "--timeout", "300ms")
    assert (lines["slow"]["exit_code"], lines["slow"]["source"]) == (106, "timeout")
    assert "300 ms" in lines["slow"]["message"] or "300ms" in lines["slow"]["message"], lines["slow"]["message"]
    assert lines["own"]["exit_code"] == 0 and lines["own"]["duration_ms"] >= 1000
    assert lines["quick"]["exit_code"] == 0


@pytest.mark.parametrize(
    "value, said",
    [
        (
            "0%",
            "'0%' for '--timeout <DUR|P%>': expected a whole number with an optional unit ms, s, m or h, or a percentage",
        ),
        ("12.%", "'12.%' for '--timeout <DUR|P%>': expected"),
        ("-5", "'-5' for '--timeout <DUR|P%>': expected"),
        ("1e3%", "'1e3%' for '--timeout <DUR|P%>': expected"),
        ("0", "'0' for '--timeout <DUR|P%>': duration must be greater than zero"),
        ("2000000%", "'2000000%' for '--timeout <DUR|P%>': expected"),
    ],
)
def test_a_bad_timeout_is_a_usage_error(tmp_path, value, said):
    out = tmp_path / "out"
    proc = run_cli(
        "batch", write_manifest(tmp_path / "m.jsonl", [{"args": ["true"]}]), "--out", out, "--timeout", value
    )
    assert proc.returncode == USAGE and said in proc.stderr.decode(), proc.stderr
    assert not out.exists()


HOLD = "import time; block = b'x' * (300 << 20); time.sleep(0.5)"  # 300 MB, every page touched


def most_at_once(lines) -> int:
    """How many jobs ran at once at most, from each line's start and duration."""
    from datetime import datetime

    edges = []
    for line in lines:
        start = datetime.fromisoformat(line["started_at"].replace("Z", "+00:00")).timestamp()
        edges += [(start, 1), (start + line["duration_ms"] / 1000, -1)]
    level = peak = 0
    for _, step in sorted(edges, key=lambda edge: (edge[0], edge[1])):  # an end before a start at one instant
        level += step
        peak = max(peak, level)
    return peak


def heavy_batch(tmp_path, jobs, *flags) -> dict[str, dict]:
    """The summary of ``jobs`` run with four slots under a 700M budget, all exited 0."""
    out = tmp_path / "out"
    manifest = write_manifest(tmp_path / "m.jsonl", jobs)
    proc = run_cli("batch", manifest, "--out", out, "--jobs", "4", "--memory-budget", "700M", *flags, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return summary(out)


def test_a_memory_budget_runs_no_more_heavy_jobs_at_once_than_fit(tmp_path):
    """Four jobs of 300 MB whose peaks an earlier summary recorded, under 700M with four slots:
    two at a time (a third would not fit), none killed."""
    jobs = [{"args": [PY, "-c", HOLD], "id": f"heavy{n}"} for n in range(4)]
    history = tmp_path / "history.jsonl"
    history.write_text(
        "".join(json.dumps({"id": job["id"], "resources": {"peak_memory_bytes": 330 << 20}}) + "\n" for job in jobs)
    )
    lines = list(heavy_batch(tmp_path, jobs, "--history", history).values())
    assert all(line["exit_code"] == 0 and line["source"] == "child_exit" for line in lines)
    assert all(line["resources"]["peak_memory_bytes"] >= 300 << 20 for line in lines)
    assert most_at_once(lines) == 2


def test_jobs_of_unknown_peak_start_one_alone_then_as_large_as_the_batch_has_seen(tmp_path):
    """No history and no max_memory: the first job runs alone (the batch knows no peak yet);
    once it ended, the others are reckoned at its measured peak: two at a time under 700M."""
    jobs = [{"args": [PY, "-c", HOLD], "id": f"heavy{n}"} for n in range(4)]
    lines = sorted(heavy_batch(tmp_path, jobs).values(), key=lambda line: line["started_at"])
    assert most_at_once(lines[:2]) == 1, "the first job ran alone"
    assert most_at_once(lines) == 2


def test_a_job_larger_than_the_budget_runs_alone_and_max_memory_is_its_expected_peak(tmp_path):
    """max_memory names a job's expected peak: the 1G one cannot fit under 700M, so it runs with
    no other beside it; the small ones (10M each) run side by side."""
    sleeper = ["sleep", "0.4"]
    jobs = [{"args": sleeper, "id": f"small{n}", "max_memory": "10M"} for n in range(2)]
    jobs.append({"args": sleeper, "id": "big", "max_memory": "1G"})
    jobs += [{"args": sleeper, "id": f"after{n}", "max_memory": "10M"} for n in range(2)]
    out = tmp_path / "out"
    proc = run_cli(
        "batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", out, "--jobs", "4", "--memory-budget", "700M"
    )
    assert proc.returncode == 0, proc.stderr
    lines = summary(out)
    big = lines.pop("big")
    assert all(most_at_once([big, line]) == 1 for line in lines.values()), "nothing ran beside the big job"
    assert most_at_once([lines["small0"], lines["small1"]]) == 2
    assert most_at_once([lines["after0"], lines["after1"]]) == 2


@pytest.mark.parametrize("value", ["0", "12x", "1.5G"])
def test_a_bad_memory_budget_is_a_usage_error(tmp_path, value):
    out = tmp_path / "out"
    proc = run_cli(
        "batch", write_manifest(tmp_path / "m.jsonl", [{"args": ["true"]}]), "--out", out, "--memory-budget", value
    )
    assert proc.returncode == USAGE and f"'{value}' for '--memory-budget <SIZE>'" in proc.stderr.decode(), proc.stderr
    assert not out.exists()


@pytest.mark.parametrize("flags", [("--timeout", "300%"), ("--memory-budget", "1G")])
def test_the_one_machine_limits_are_refused_with_dask_before_anything_starts(tmp_path, flags):
    out = tmp_path / "out"
    manifest = write_manifest(tmp_path / "m.jsonl", [{"args": ["true"]}])
    proc = run_cli("batch", manifest, "--out", out, "--dask-scheduler", "tcp://127.0.0.1:9", *flags)
    assert proc.returncode == USAGE, proc.stderr
    assert b"decides on one machine's jobs: it cannot be used with --dask-scheduler" in proc.stderr
    assert not out.exists()


@needs("pids")
def test_a_job_whose_pids_cap_refused_a_fork_says_so_as_run_does(tmp_path):
    """A job's child failing for a fork its ``max_processes`` refused (a shell's ``Cannot fork``,
    exit 2) reads as its own failure: its terminal line, the closing block and its summary line
    say the cap did it, in ``run``'s words; a capped job that forked within its cap says nothing."""
    refused = FORK_LOOP + "raise SystemExit(2 if forks < 60 else 0)\n"
    jobs = [
        {"args": [PY, "-c", refused], "id": "forks", "max_processes": 10},
        {"args": ["true"], "id": "within", "max_processes": 10},
    ]
    proc, lines = failing_batch(tmp_path, jobs)
    said = "(a pids cap refused its tree a fork, its max_processes 10 or one above it)"
    err = proc.stderr.decode().splitlines()
    # (its forked children, ending as the root's pipe closes, may be said left running after it)
    assert any(line.startswith(f"batch: forks: exit 2 {said}") for line in err), err
    assert any(line.startswith(f"  forks: exit 2 {said}") for line in err), err
    assert lines["forks"]["pids_cap_refused"] == 10
    assert "pids_cap_refused" not in lines["within"] and not any("within" in line and "pids" in line for line in err)
    # A Dask task that failed as a whole reads these lines back from the streams: the same cap said.
    from processkit.batching.ended import line_from_stream
    from processkit.batching.manifest import jobs_from

    out = tmp_path / "out"
    label = json.loads((out / "forks" / "events.jsonl").read_text().splitlines()[0])["labels"]["batch"]
    read = {job.id: line_from_stream(job, str(out), label) for job in jobs_from(jobs)}
    assert read["forks"] is not None and read["forks"].pids_cap_refused == 10
    assert read["forks"].notes().startswith(f" {said}"), read["forks"].notes()
    assert read["within"] is not None and read["within"].pids_cap_refused is None
