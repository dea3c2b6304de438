"""``batch --id`` is the jobs' id template, where GNU parallel's ``--id`` names a semaphore: a
parallel user's ``--id mysem`` made every job's id ``mysem`` (numbered unique) without a word,
and no semaphore. Now one warning says so, once a second job is made from it; a template with a
replacement string, or one job, is said nothing of."""

from __future__ import annotations

from conftest import run_cli


def test_an_id_with_no_replacement_string_is_said_to_be_every_jobs(tmp_path):
    proc = run_cli("batch", "--id", "mysem", "--out", tmp_path / "o", "--", "true", ":::", "a", "b", "c", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.decode().splitlines() if "warning:" in line]
    assert warnings == [
        "processkit-cli: warning: --id 'mysem' has no replacement string, so it is every job's id, numbered to keep "
        "each unique (GNU parallel's --id names a semaphore: batch has none; --group-limit NAME=N caps the jobs of "
        "a group)"
    ], proc.stderr
    assert sorted(path.name for path in (tmp_path / "o").iterdir() if path.is_dir()) == ["mysem", "mysem-2", "mysem-3"]


def test_an_id_template_or_a_single_job_is_said_nothing_of(tmp_path):
    for args in (("--id", "shard-{}", "--", "true", ":::", "a", "b"), ("--id", "build", "--", "true", ":::", "all")):
        proc = run_cli("batch", "--out", tmp_path / args[1].replace("{}", ""), *args, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert b"warning" not in proc.stderr, proc.stderr
