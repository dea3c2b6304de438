"""A file one flag writes named again by another (``--jsonl DIR/stdout.log --capture-dir DIR``,
``--usage-file`` at the stream, ``report S -o S``) is refused or left alone, and said: before,
the stream and a capture wrote into one file, or a stream or an input was replaced whole, with
no word and exit 0. An output that cannot be a file at all (a directory) is refused before the
work it would hold, not after it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from conftest import run_cli
from streams import check_stream, one

SETUP = 111


def test_a_capture_file_that_is_the_jsonl_stream_fails_the_setup(tmp_path):
    cap_dir = tmp_path / "cap"
    cap_dir.mkdir()
    (cap_dir / "stderr.log").write_bytes(b"kept\n")
    os.link(cap_dir / "stderr.log", tmp_path / "run.jsonl")  # the same file by another name
    proc = run_cli("run", "--jsonl", tmp_path / "run.jsonl", "--capture-dir", cap_dir, "--", "echo", "hi")
    assert proc.returncode == SETUP, proc.stderr
    assert proc.stdout == b""
    assert (
        proc.stderr
        == f"processkit-cli: could not set up output capture in `{cap_dir}`: stderr.log there is the JSONL events file\n".encode()
    )
    final = one(check_stream(tmp_path / "run.jsonl", SETUP), "runner_exit")
    assert final["source"] == "setup"
    assert not (cap_dir / "stdout.log").exists(), "what the failed setup made is removed"


def test_the_apis_capture_at_the_stream_is_the_same_line_naming_no_flag(tmp_path):
    """The message named the stream by its flag, which the API turned into ``the jsonl=file``;
    it is the reference's name for the stream, so the API's line is the CLI's."""
    import processkit

    result = processkit.run(["true"], jsonl=str(tmp_path / "stdout.log"), capture_dir=str(tmp_path))
    assert result.returncode == SETUP
    assert (
        result.message == f"could not set up output capture in `{tmp_path}`: stdout.log there is the JSONL events file"
    )


def test_a_ring_captures_layout_record_at_the_stream_fails_the_setup(tmp_path):
    """``--capture-keep tail`` writes capture-keep.json beside the logs, over its name."""
    cap_dir = tmp_path / "cap"
    jsonl = cap_dir / "capture-keep.json"
    cap_dir.mkdir()
    proc = run_cli("run", "--jsonl", jsonl, "--capture-dir", cap_dir, "--capture-keep", "tail", "--", "echo", "hi")
    assert proc.returncode == SETUP, proc.stderr
    assert (
        proc.stderr
        == f"processkit-cli: could not set up output capture in `{cap_dir}`: capture-keep.json there is the JSONL events file\n".encode()
    )
    assert one(check_stream(jsonl, SETUP), "runner_exit")["source"] == "setup"
    assert sorted(os.listdir(cap_dir)) == ["capture-keep.json"]


def test_a_usage_file_at_the_stream_leaves_the_stream_whole(tmp_path):
    jsonl = tmp_path / "run.jsonl"
    proc = run_cli("run", "--jsonl", jsonl, "--usage-file", jsonl, "--", "echo", "hi")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"hi\n"
    assert (
        proc.stderr
        == f"processkit-cli: warning: could not write the usage file `{jsonl}`: it is the --jsonl stream: not overwritten\n".encode()
    )
    assert one(check_stream(jsonl, 0), "runner_exit")["code"] == 0


def test_a_report_never_replaces_its_input(tmp_path):
    jsonl = tmp_path / "run.jsonl"
    assert run_cli("run", "--jsonl", jsonl, "--", "true").returncode == 0
    before = jsonl.read_bytes()
    proc = run_cli("report", jsonl, "-o", jsonl)
    assert proc.returncode == SETUP, proc.stderr
    assert proc.stdout == b""
    assert (
        proc.stderr
        == f"processkit-cli: cannot write {jsonl}: it is an input of this report: not overwritten\n".encode()
    )
    assert jsonl.read_bytes() == before


def test_a_bench_export_at_a_directory_is_refused_before_any_run(tmp_path):
    done = run_cli("bench", "--runs", "1", "--export-json", tmp_path, "-N", "--", "touch", tmp_path / "ran")
    assert done.returncode == SETUP, done.stderr
    assert done.stdout == b""
    assert done.stderr == f"processkit-cli: cannot write {tmp_path}: Is a directory\n".encode()
    assert not (tmp_path / "ran").exists(), "the benchmark ran before its export was found unwritable"


def test_a_batchs_junit_never_replaces_its_manifest(tmp_path):
    """The manifest is read again as jobs start and is the batch's only record of its jobs: a
    report derived from the run is not written over it. The clash is known before any job, so
    the batch is refused then (111), not after every job ran."""
    manifest = tmp_path / "jobs.jsonl"
    manifest.write_bytes(json.dumps({"args": ["touch", str(tmp_path / "ran")]}).encode() + b"\n")
    before = manifest.read_bytes()
    proc = run_cli("batch", manifest, "--out", tmp_path / "out", "--junit", manifest)
    assert proc.returncode == SETUP, proc.stderr
    assert proc.stderr == f"processkit-cli: cannot write {manifest}: it is the manifest\n".encode()
    assert manifest.read_bytes() == before
    assert not (tmp_path / "ran").exists(), "the job ran before the clash was refused"


@pytest.mark.parametrize(
    ("junit", "what"),
    [
        ("t.json", "the --trace file"),
        ("o3/summary.jsonl", "the batch's summary"),
        ("o3/index.html", "the batch's page"),
        ("lnk", "the --out directory"),
        ("lnk/summary.jsonl", "the batch's summary"),
    ],
)
def test_a_batchs_junit_at_another_of_its_files_is_refused_before_any_job(tmp_path, junit, what):
    """``--junit`` at the ``--trace`` file, the summary or the page in ``--out`` (or the ``--out``
    directory through a symlink) ran every job, then failed 111: the clash, known at the start,
    is refused then, with nothing run."""
    os.symlink("o3", tmp_path / "lnk")
    flags = ["--out", "o3", "--junit", junit, "--trace", "t.json"]
    proc = run_cli("batch", *flags, "--", "touch", tmp_path / "ran", ":::", "a", cwd=tmp_path)
    assert proc.returncode == SETUP, proc.stderr
    assert proc.stderr == f"processkit-cli: cannot write {junit}: it is {what}\n".encode()
    assert not (tmp_path / "ran").exists(), "the job ran before the clash was refused"


def test_a_bench_export_at_its_baseline_keeps_the_baseline_when_the_benchmark_fails(tmp_path):
    """``--baseline b.json --export-json b.json`` rolls the baseline forward; a benchmark that
    fails (or is stopped) midway must not leave b.json empty: that export is written at the end only."""
    baseline = tmp_path / "b.json"
    made = run_cli("bench", "--runs", "2", "-N", "--export-json", baseline, "--", "true")
    assert made.returncode == 0, made.stderr
    before = baseline.read_bytes()
    failed = run_cli("bench", "--runs", "2", "-N", "--baseline", baseline, "--export-json", baseline, "--", "false")
    assert failed.returncode == 118, failed.stderr
    assert baseline.read_bytes() == before
    rolled = run_cli("bench", "--runs", "2", "-N", "--baseline", baseline, "--export-json", baseline, "--", "true")
    assert rolled.returncode == 0, rolled.stderr
    assert json.loads(baseline.read_bytes())["baseline"]["file"] == str(baseline)


def test_a_batchs_reports_both_at_a_device_are_both_written(tmp_path):
    """Only a regular file is replaced: a device or a pipe named by both flags is written in
    place by each, and is no collision (``/dev/null`` was refused as the --trace file)."""
    manifest = tmp_path / "jobs.jsonl"
    manifest.write_bytes(b'{"id": "a", "args": ["true"]}\n')
    quiet = run_cli("batch", manifest, "--out", tmp_path / "out1", "--trace", "/dev/null", "--junit", "/dev/null")
    assert quiet.returncode == 0, quiet.stderr
    assert b"warning" not in quiet.stderr, quiet.stderr
    both = run_cli("batch", manifest, "--out", tmp_path / "out2", "--trace", "/dev/stdout", "--junit", "/dev/stdout")
    assert both.returncode == 0, both.stderr
    assert b"warning" not in both.stderr, both.stderr
    trace, _, junit = both.stdout.partition(b"\n")
    assert json.loads(trace)["traceEvents"]
    assert junit.startswith(b'<?xml version="1.0"') and b'<testcase name="a"' in junit


def test_a_usage_file_at_a_device_a_capture_is_linked_to_is_written(tmp_path):
    """A capture log that is a link to ``/dev/null`` and ``--usage-file /dev/null``: one device,
    written in place by both, never replaced: no warning."""
    cap_dir = tmp_path / "cap"
    cap_dir.mkdir()
    (cap_dir / "stdout.log").symlink_to("/dev/null")
    jsonl = tmp_path / "run.jsonl"
    proc = run_cli("run", "--jsonl", jsonl, "--capture-dir", cap_dir, "--usage-file", "/dev/null", "--", "echo", "hi")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"hi\n"
    assert proc.stderr == b""
    assert one(check_stream(jsonl, 0), "runner_exit")["code"] == 0


def test_a_report_never_replaces_the_capture_it_reads_beside_the_stream(tmp_path):
    """With no --capture-dir the page reads ``cap/stdout.log`` found beside ``run.jsonl``: an input too."""
    jsonl, log = tmp_path / "run.jsonl", tmp_path / "cap" / "stdout.log"
    assert run_cli("run", "--jsonl", jsonl, "--capture-dir", tmp_path / "cap", "--", "echo", "hi").returncode == 0
    proc = run_cli("report", jsonl, "-o", log)
    assert proc.returncode == SETUP, proc.stderr
    assert (
        proc.stderr == f"processkit-cli: cannot write {log}: it is an input of this report: not overwritten\n".encode()
    )
    assert log.read_bytes() == b"hi\n"


def test_a_batch_report_never_replaces_the_summary_or_a_capture_it_reads(tmp_path):
    """``report DIR`` reads the batch's summary and its failed jobs' captures."""
    manifest, out = tmp_path / "jobs.jsonl", tmp_path / "out"
    manifest.write_bytes(b'{"id": "a", "args": ["sh", "-c", "echo broke; exit 3"]}\n')
    assert run_cli("batch", manifest, "--out", out).returncode != 0
    for target in (out / "summary.jsonl", out / "a" / "capture" / "stdout.log"):
        before = target.read_bytes()
        proc = run_cli("report", out, "-o", target)
        assert proc.returncode == SETUP, proc.stderr
        said = f"processkit-cli: cannot write {target}: it is an input of this report: not overwritten\n"
        assert proc.stderr == said.encode()
        assert target.read_bytes() == before
    redrawn = run_cli("report", out, "-o", out / "index.html")  # the page is no input: drawn again
    assert redrawn.returncode == 0, redrawn.stderr


def test_a_bench_export_at_its_baseline_is_not_written_when_every_run_timed_out(tmp_path):
    """A benchmark that ends in failure (118) after its runs, here every run cut by ``--timeout``,
    has no figures to roll forward: ``b.json`` stays the baseline, and the next one reads it
    (an export with a null mean was written over it, and that next benchmark failed 114)."""
    baseline = tmp_path / "b.json"
    made = run_cli("bench", "--runs", "2", "-N", "-n", "job", "--export-json", baseline, "true")
    assert made.returncode == 0, made.stderr
    before = baseline.read_bytes()
    markdown = tmp_path / "m.md"
    cut = ("--runs", "2", "-N", "-n", "job", "--timeout", "1ms", "--baseline", baseline, "--export-json", baseline)
    failed = run_cli("bench", *cut, "--export-markdown", markdown, "sleep 30")
    assert failed.returncode == 118, failed.stderr
    assert failed.stderr.endswith(b"processkit-cli: every run of 'job' timed out\n"), failed.stderr
    assert baseline.read_bytes() == before
    assert b"| `job` | timed out |" in markdown.read_bytes(), "another export is written as ever"
    rolled = run_cli(
        "bench", "--runs", "2", "-N", "-n", "job", "--baseline", baseline, "--export-json", baseline, "true"
    )
    assert rolled.returncode == 0, rolled.stderr


def test_a_bench_export_at_its_baseline_is_not_written_when_the_gate_fails(tmp_path):
    """A regression the gate fails (119) must not become the baseline: rolled forward, the same
    CI job run again would pass against its slower figures. The baseline is crafted far faster
    than any real run, so the verdict cannot depend on this host's load; the other exports are
    still written, with the verdict."""
    baseline = tmp_path / "b.json"
    times = [0.001, 0.0011, 0.0012, 0.001, 0.0011]
    results = [
        {
            "command": "sleep 0.05",
            **dict.fromkeys(("mean", "stddev", "median", "user", "system", "min", "max"), 0.001),
            "times": times,
        }
    ]
    baseline.write_text(json.dumps({"results": results}))
    before = baseline.read_bytes()
    other = tmp_path / "new.md"
    gated = ("--runs", "5", "--baseline", baseline, "--fail-if-slower", "10")
    failed = run_cli("bench", *gated, "--export-json", baseline, "--export-markdown", other, "sleep 0.05", timeout=120)
    assert failed.returncode == 119, failed.stderr
    assert baseline.read_bytes() == before
    assert b"sleep 0.05" in other.read_bytes(), "another export is written as ever"


def _batch_that_marks(tmp_path):
    manifest = tmp_path / "jobs.jsonl"
    manifest.write_text(json.dumps({"id": "a", "args": ["touch", str(tmp_path / "ran")]}) + "\n")
    return manifest


def test_a_batchs_unwritable_reports_are_refused_before_any_job(tmp_path):
    """``--junit``/``--trace`` at a missing directory or at a directory: one setup line (111)
    before the first job, not a warning after every job ran and the report was lost."""
    manifest = _batch_that_marks(tmp_path)
    missing = tmp_path / "nowhere" / "junit.xml"
    for flag, path, said in (
        ("--junit", missing, f"could not open the JUnit file `{missing}`: No such file or directory (os error 2)"),
        ("--trace", tmp_path, f"cannot write {tmp_path}: Is a directory"),
    ):
        proc = run_cli("batch", manifest, "--out", tmp_path / "out", flag, path)
        assert proc.returncode == SETUP, proc.stderr
        assert proc.stderr == f"processkit-cli: {said}\n".encode()
        assert not (tmp_path / "ran").exists(), "the batch ran before its report was found unwritable"
        assert not (tmp_path / "out").exists()


def test_a_batchs_report_on_a_read_only_file_system_is_refused_before_any_job(tmp_path, small_tmpfs):
    """The line says the mount is read-only, in the kernel's words: "cannot create a file in DIR"
    sent root (whom no mode bit stops) looking at the directory's mode."""
    manifest = _batch_that_marks(tmp_path)
    frozen = small_tmpfs("ro", "ro,size=64k")
    proc = run_cli("batch", manifest, "--out", tmp_path / "out", "--junit", frozen / "junit.xml")
    assert proc.returncode == SETUP, proc.stderr
    assert (
        proc.stderr
        == f"processkit-cli: could not open the JUnit file `{frozen / 'junit.xml'}`: Read-only file system (os error 30)\n".encode()
    )
    assert not (tmp_path / "ran").exists()


def test_an_output_in_an_immutable_directory_says_the_kernels_own_refusal(tmp_path):
    """A file not made says the errno the failing call gave (an immutable directory: ``EPERM``),
    both at the early check (a batch's report) and at the write (``report -o``): before, it was
    guessed from the mount's flags, and this one was said as a permission (``EACCES``)."""
    jsonl = tmp_path / "run.jsonl"
    assert run_cli("run", "--jsonl", jsonl, "--", "true").returncode == 0
    manifest = _batch_that_marks(tmp_path)
    stuck = tmp_path / "stuck"
    stuck.mkdir()
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed here")
    if subprocess.run(["chattr", "+i", stuck], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here (needs root and a filesystem that keeps the flag)")
    try:
        page = run_cli("report", jsonl, "-o", stuck / "page.md")
        early = run_cli("batch", manifest, "--out", tmp_path / "out", "--junit", stuck / "junit.xml")
    finally:
        subprocess.run(["chattr", "-i", stuck], check=True)
    assert page.returncode == SETUP, page.stderr
    assert page.stderr == f"processkit-cli: cannot write {stuck / 'page.md'}: Operation not permitted\n".encode()
    assert early.returncode == SETUP, early.stderr
    said = f"could not open the JUnit file `{stuck / 'junit.xml'}`: Operation not permitted (os error 1)"
    assert early.stderr == f"processkit-cli: {said}\n".encode()
    assert not (tmp_path / "ran").exists()
    assert os.listdir(stuck) == []


def test_a_batchs_report_file_is_kept_until_the_end(tmp_path):
    """The early check writes nothing over a report already there: a job sees the old one."""
    report = tmp_path / "junit.xml"
    report.write_bytes(b"earlier\n")
    manifest = tmp_path / "jobs.jsonl"
    manifest.write_text(json.dumps({"id": "a", "args": ["cp", str(report), str(tmp_path / "seen")]}) + "\n")
    proc = run_cli("batch", manifest, "--out", tmp_path / "out", "--junit", report, "--trace", "/dev/null")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "seen").read_bytes() == b"earlier\n"
    assert b'<testcase name="a"' in report.read_bytes()
    assert sorted(os.listdir(tmp_path)) == ["jobs.jsonl", "junit.xml", "out", "seen"]


def test_a_batchs_report_in_the_out_it_is_about_to_make_is_written(tmp_path):
    """``--out OUT --junit OUT/j.xml`` with no OUT yet: the batch makes OUT, so the early check
    never refuses its report there (a CI's usual layout)."""
    manifest = _batch_that_marks(tmp_path)
    out = tmp_path / "out"
    proc = run_cli("batch", manifest, "--out", out, "--junit", out / "j.xml", "--trace", out / "t.json")
    assert proc.returncode == 0, proc.stderr
    assert b'<testcase name="a"' in (out / "j.xml").read_bytes()
    assert json.loads((out / "t.json").read_bytes())["traceEvents"]


def test_a_batchs_report_at_or_inside_a_jobs_directory_is_refused_before_any_job(tmp_path):
    """``--junit OUT/a/events.jsonl`` (``a`` a job id) wrote the JUnit XML over job a's event
    stream, ``--trace OUT/b/capture/stdout.log`` over b's capture; a fresh ``--junit OUT/a``
    failed only after every job ran. One directly in OUT stays allowed."""
    manifest, out = tmp_path / "jobs.jsonl", tmp_path / "out"
    manifest.write_bytes(b'{"id": "a", "args": ["true"]}\n{"id": "b", "args": ["echo", "hi"]}\n')
    fresh = run_cli("batch", manifest, "--out", out, "--junit", out / "a")
    assert fresh.returncode == SETUP, fresh.stderr
    assert fresh.stderr == f"processkit-cli: cannot write {out / 'a'}: it is job a's directory\n".encode()
    assert not out.exists()
    assert run_cli("batch", manifest, "--out", out).returncode == 0
    for flag, target, job in (
        ("--junit", out / "a" / "events.jsonl", "a"),
        ("--trace", out / "b" / "capture" / "stdout.log", "b"),
    ):
        before = target.read_bytes()
        proc = run_cli("batch", manifest, "--out", out, flag, target)
        assert proc.returncode == SETUP, proc.stderr
        assert proc.stderr == f"processkit-cli: cannot write {target}: it is inside job {job}'s directory\n".encode()
        assert target.read_bytes() == before
    beside = run_cli("batch", manifest, "--out", out, "--junit", out / "junit.xml")
    assert beside.returncode == 0, beside.stderr


def test_a_report_inside_a_jobs_directory_under_a_fresh_out_is_refused_in_the_same_words(tmp_path):
    """``--junit OUT/a/j.xml`` with no OUT yet was refused before any job by the system's words
    (``No such file or directory``: job a's directory is not made yet), where an old OUT got "it
    is inside job a's directory". Both say the latter now; nothing is made."""
    manifest, out = tmp_path / "jobs.jsonl", tmp_path / "out"
    manifest.write_bytes(b'{"id": "a", "args": ["true"]}\n{"id": "b", "args": ["true"]}\n')
    for flag, target, job in (("--junit", out / "a" / "j.xml", "a"), ("--trace", out / "b" / "t" / "t.json", "b")):
        proc = run_cli("batch", manifest, "--out", out, flag, target)
        assert proc.returncode == SETUP, proc.stderr
        assert proc.stderr == f"processkit-cli: cannot write {target}: it is inside job {job}'s directory\n".encode()
        assert not out.exists()


def test_an_unwritable_report_under_out_is_refused_with_an_empty_manifest_too(tmp_path):
    """A report in a directory under ``--out`` is tried once the jobs are known; with no job to run
    it was not tried at all (exit 0), where the same report outside ``--out`` is a setup failure."""
    manifest, out = tmp_path / "jobs.jsonl", tmp_path / "out"
    manifest.write_bytes(b"")
    out.mkdir()
    for target in (out / "nope" / "j.xml", tmp_path / "nope" / "j.xml"):
        proc = run_cli("batch", manifest, "--out", out, "--junit", target)
        assert proc.returncode == SETUP, (target, proc.stderr)
        assert f"could not open the JUnit file `{target}`".encode() in proc.stderr


def test_a_report_inside_a_directory_of_a_job_read_as_it_came_is_refused_at_the_end(tmp_path):
    """A template's jobs read from stdin are known only as they come: a report inside one's
    directory is refused once they all ran (111, the jobs' own record kept), not written over it."""
    out = tmp_path / "out"
    names = b"a\nb\n"
    assert run_cli("batch", "--out", out, "--id", "{}", "--", "echo", "{}", input=names, stdin=None).returncode == 0
    target = out / "a" / "events.jsonl"
    again = run_cli("batch", "--out", out, "--id", "{}", "--junit", target, "--", "echo", "{}", input=names, stdin=None)
    assert again.returncode == SETUP, again.stderr
    assert f"cannot write {target}: it is inside job a's directory".encode() in again.stderr
    assert target.read_bytes() != b"" and b"<testsuite" not in target.read_bytes()
    assert json.loads(target.read_bytes().splitlines()[0])["event"] == "run_started"
