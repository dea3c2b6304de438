"""``report DIR`` of a batch killed (SIGKILL, the OOM killer, a CI runner's hard stop) before it
recorded its running jobs: their streams are in ``DIR``, its summary has no line for them, and
the page said ``a batch of 0 jobs ... No job ran`` without a word. Now one warning names the job
directories the summary has no line for, as the batch's own end names an earlier batch's."""

from __future__ import annotations

import json

from conftest import SAFETY_NET, run_cli, start_cli, wait_for_event
from streams import wait_until


def test_report_names_the_job_directories_its_summary_has_no_line_for(tmp_path):
    out = tmp_path / "out"
    manifest = tmp_path / "m.jsonl"
    jobs = [{"args": ["sleep", "30"], "id": name} for name in ("a", "b")]
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    batch = start_cli("batch", manifest, "--out", out, "--jobs", "2", cwd=tmp_path)
    try:
        for name in ("a", "b"):
            wait_for_event(out / name / "events.jsonl", "run_started")
    finally:
        batch.kill()  # its own batch, by handle
        batch.communicate(timeout=SAFETY_NET)
    try:
        drawn = run_cli("report", out, "-o", tmp_path / "page.html", cwd=tmp_path)
        assert drawn.returncode == 0, drawn.stderr
        assert drawn.stdout.decode().strip().endswith("a batch of 0 jobs")
        assert drawn.stderr.decode().splitlines() == [
            f"processkit-cli: warning: {out} holds 2 job directories its summary has no line for (a, b): the page "
            "leaves them out (a batch killed before it recorded them, or an earlier batch's)"
        ]
    finally:  # the killed batch's jobs (they sleep on in their groups): ended now, not by a later sweep
        pruned = run_cli("prune")
        assert pruned.returncode == 0, pruned.stderr


def test_report_of_a_batch_that_recorded_every_job_says_nothing_more(tmp_path):
    ran = run_cli("batch", "--out", "out", "--", "true", ":::", "a", "b", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    drawn = run_cli("report", "out", "-o", "page.html", cwd=tmp_path)
    assert (drawn.returncode, drawn.stderr) == (0, b"")


def test_report_while_the_batch_runs_says_it_is_still_running(tmp_path):
    """The batch holds ``DIR/.batch-lock`` for its life: a job it has not recorded yet is not
    blamed on "a batch killed"."""
    out, manifest, release = tmp_path / "out", tmp_path / "m.jsonl", tmp_path / "release"
    jobs = [
        {"id": "fast", "args": ["true"]},
        {"id": "slow", "args": ["sh", "-c", f"while [ ! -e {release} ]; do sleep 0.01; done"]},
    ]
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    batch = start_cli("batch", manifest, "--out", out, "--jobs", "2", cwd=tmp_path)
    try:
        wait_for_event(out / "slow" / "events.jsonl", "run_started")
        wait_until(lambda: '"fast"' in (out / "summary.jsonl").read_text(), what="the fast job's line")
        drawn = run_cli("report", out, "-o", tmp_path / "page.html", cwd=tmp_path)
        release.touch()
        batch.communicate(timeout=SAFETY_NET)
    finally:
        if batch.poll() is None:  # a step failed: its own batch, by handle
            batch.kill()
            batch.wait()
    assert drawn.returncode == 0, drawn.stderr
    assert drawn.stderr.decode().splitlines() == [
        f"processkit-cli: warning: {out} holds 1 job directory its summary has no line for (slow): the page "
        "leaves it out (the batch writing into it is still running and has not recorded it yet)"
    ]
    assert batch.returncode == 0
