"""A batch job whose attempt raises outside the runner's steps (its set-up before them, the
batch's bookkeeping for it after) is the batch group's own failure (issue 45): that job ends as
itself, a summary line saying the runner's ``internal`` error in one line, and every other job
runs to its own end; only ``--halt-on-failure`` keeps more jobs from starting."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

from processkit.batching import attempt, on_host
from processkit.batching.manifest import jobs_from
from processkit.batching.on_host import Settings, run_batch

HEALTHY = 6


def _jobs() -> list[dict]:
    jobs = [{"args": ["sh", "-c", f"echo {n}"], "id": f"ok{n}"} for n in range(HEALTHY)]
    jobs.insert(2, {"args": ["sh", "-c", "echo bad"], "id": "bad"})
    return jobs


def _raising_for_bad(real):
    def wrapped(first, *args, **kwargs):
        # job_spec(job, ...) names the job; settle(held, failed, jsonl, ...) its stream's path;
        # with_slot(args, plan, slot) its command
        if getattr(first, "id", None) == "bad" or "/bad/" in str(args[1:2]) or first == ["sh", "-c", "echo bad"]:
            raise RuntimeError("the job's bookkeeping broke\nhere")
        return real(first, *args, **kwargs)

    return wrapped


@pytest.mark.parametrize("where", ["with_slot", "job_spec", "settle"])
def test_a_job_raising_outside_its_steps_ends_alone_beside_healthy_ones(tmp_path, monkeypatch, where):
    """``with_slot``: the batch's bookkeeping as the job starts; ``job_spec``: the attempt's
    set-up, before the runner's steps; ``settle``: ``--keep failed``'s bookkeeping once they
    ended (its held memfds still given back)."""
    module = on_host if where == "with_slot" else attempt  # where each is called from
    monkeypatch.setattr(module, where, _raising_for_bad(getattr(module, where)))
    out = tmp_path / "out"
    settings = Settings(str(out), 3, keep_failed_only=where == "settle")
    lines, counts = run_batch(jobs_from(_jobs()), settings, signals=False)
    by_id = {line.id: line for line in lines}
    assert sorted(by_id) == sorted(["bad", *(f"ok{n}" for n in range(HEALTHY))])
    bad = by_id.pop("bad")
    assert bad.exit_code == 104 and bad.source == "internal", bad
    assert bad.message == "internal error: RuntimeError: the job's bookkeeping broke here"
    assert all(line.exit_code == 0 and line.source == "child_exit" for line in by_id.values())
    assert counts.cancelled_by is None
    recorded = [json.loads(text) for text in (out / "summary.jsonl").read_text().splitlines()]
    assert {line["id"]: line["exit_code"] for line in recorded}["bad"] == 104


def test_halt_on_failure_starts_no_job_after_a_job_that_raised(tmp_path, monkeypatch):
    monkeypatch.setattr(attempt, "job_spec", _raising_for_bad(attempt.job_spec))
    out = tmp_path / "out"
    lines, _ = run_batch(jobs_from(_jobs()), Settings(str(out), 1, halt_on_failure=True), signals=False)
    ran = [line.id for line in lines if line.source != "halted"]
    assert ran == ["ok0", "ok1", "bad"], [(line.id, line.source) for line in lines]


# ``with_slot`` (the batch's bookkeeping as a job starts) meets the open-file limit for job "bad".
OUT_OF_DESCRIPTORS = (
    "(lambda real: lambda args, *rest: (_ for _ in ()).throw(OSError(24, 'Too many open files'))"
    " if args == ['sh', '-c', 'echo bad'] else real(args, *rest))"
    "(importlib.import_module('processkit.batching.on_host').with_slot)"
)


def test_a_job_out_of_descriptors_outside_its_steps_is_said_as_the_limit(tmp_path):
    """The batch made its own words, ``internal error: OSError: [Errno 24] Too many open files``,
    where a run's own fault, the CLI and the service say the limit: the one mapping now, the job
    still the runner's own failure (104), its neighbours run."""
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in _jobs()[:3]))
    out = tmp_path / "out"
    patched = ("processkit.batching.on_host", "with_slot", OUT_OF_DESCRIPTORS)
    done = run_cli("batch", manifest, "--out", out, "--jobs", "1", patched=patched, cwd=tmp_path)
    recorded = {line["id"]: line for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}
    bad = recorded.pop("bad")
    assert (bad["exit_code"], bad["source"]) == (104, "internal"), done.stderr
    assert bad["message"].startswith("no descriptor left for the run: the open-file limit (ulimit -n: "), bad
    assert [line["exit_code"] for line in recorded.values()] == [0, 0]


def test_a_batch_that_raises_before_its_jobs_leaves_no_host_counted_unseen(tmp_path, monkeypatch):
    """A host inside another program (``signals=False``: a Dask worker's chunk) counts itself in
    ``ChildrenUsage.unseen`` until it is closed. It was made long before the ``try`` that closes
    it: a raise in between left the count up, and every later run in that process had its CPU
    and I/O reported null."""
    from processkit.containment.accounting import ChildrenUsage

    before = ChildrenUsage._unseen

    def gone():
        raise FileNotFoundError("the working directory is gone")

    monkeypatch.setattr(on_host, "_own_context", gone)
    with pytest.raises(FileNotFoundError):
        run_batch(jobs_from(_jobs()), Settings(str(tmp_path / "out"), 1), signals=False)
    assert ChildrenUsage._unseen == before


def test_a_host_whose_close_raises_still_gives_back_its_unseen_count():
    """``Host.close`` gave the count back only after the lodging, reaper and loop closed: a raise
    in any of them left it up, and every later run in that process reported null CPU and I/O."""
    from processkit.containment.accounting import ChildrenUsage
    from processkit.engine.host import Host

    class Failing:
        def close(self):
            raise OSError("the lodging's directory is gone")

    before = ChildrenUsage._unseen
    host = Host(watch=False)
    assert ChildrenUsage._unseen == before + 1
    host.lodging = Failing()  # type: ignore[assignment]
    with pytest.raises(OSError):
        host.close()
    assert ChildrenUsage._unseen == before
    host.lodging = None
    host.close()  # the rest closed: the count not given back twice
    assert ChildrenUsage._unseen == before
