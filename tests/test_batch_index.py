"""The batch's index.html is ``report``'s page over the jobs' streams, though its process reads
each stream as the job ends: the same page as ``report`` run afterwards over the same files."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from conftest import run_cli

from processkit.batching.index import command as index_command
from processkit.batching.index import serve

STAMP = re.compile(rb"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC")


def page(path) -> bytes:
    return STAMP.sub(b"<generated>", path.read_bytes())


def report_of(out, ids, tmp_path):
    target = tmp_path / "report.html"
    proc = run_cli("report", *[str(out / job / "events.jsonl") for job in ids], "-o", str(target))
    assert proc.returncode == 0, proc.stderr
    return page(target)


def write(path, jobs) -> str:
    path.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    return str(path)


def test_the_index_is_reports_page_over_the_same_streams(tmp_path):
    marker = tmp_path / "second-try"
    flaky = (
        f"import os, sys; p = {str(marker)!r}; ok = os.path.exists(p); open(p, 'w').close(); sys.exit(0 if ok else 5)"
    )
    jobs = [
        {"args": ["sh", "-c", "echo one"], "id": "a"},
        {"args": ["sh", "-c", "exit 3"], "id": "b"},
        {"args": [sys.executable, "-c", flaky], "id": "c"},  # its stream is written twice (--retries)
        {"args": ["true"], "id": "d", "labels": {"team": "x"}},
    ]
    out = tmp_path / "out"
    proc = run_cli("batch", write(tmp_path / "m.jsonl", jobs), "--out", str(out), "--jobs", "2", "--retries", "1")
    assert proc.returncode == 117, proc.stderr
    assert page(out / "index.html") == report_of(out, "abcd", tmp_path)
    # --resume: the jobs skipped keep their earlier streams, and the page still holds them
    proc = run_cli("batch", write(tmp_path / "m.jsonl", jobs), "--out", str(out), "--jobs", "2", "--resume")
    assert page(out / "index.html") == report_of(out, "abcd", tmp_path)


def test_a_batch_of_one_job_gets_that_runs_page(tmp_path):
    out = tmp_path / "out"
    proc = run_cli("batch", write(tmp_path / "m.jsonl", [{"args": ["true"], "id": "only"}]), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert page(out / "index.html") == report_of(out, ["only"], tmp_path)


def fake_stream(out, job_id: str, code: int) -> None:
    """A finished run's stream as the batch leaves it, made by ``run`` itself."""
    os.makedirs(out / job_id, exist_ok=True)
    proc = run_cli("run", "--jsonl", str(out / job_id / "events.jsonl"), "--", "sh", "-c", f"exit {code}")
    assert proc.returncode == code, proc.stderr


def test_a_stream_changed_after_it_was_read_is_read_again(tmp_path):
    out = tmp_path / "out"
    for job_id in "xy":
        fake_stream(out, job_id, 0)
    paths = [os.fsencode(out / job_id / "events.jsonl") for job_id in "xy"]

    class Pipe:
        """Both paths read ahead; then y is rewritten (as a retry would), then the final list."""

        def __init__(self):
            self.chunks = [b"".join(b"+" + path + b"\0" for path in paths), b"=\0" + b"".join(p + b"\0" for p in paths)]

        def read1(self, size):
            if len(self.chunks) == 1:
                fake_stream(out, "y", 4)
            return self.chunks.pop(0) if self.chunks else b""

    assert serve(str(out), Pipe()) == 0
    assert page(out / "index.html") == report_of(out, ["x", "y"], tmp_path)


def test_without_the_final_list_no_page_is_written(tmp_path):
    """The batch died (its end of the pipe closed) before sending the final list."""
    out = tmp_path / "out"
    fake_stream(out, "x", 0)
    record = b"+" + os.fsencode(out / "x" / "events.jsonl") + b"\0"
    command = index_command(str(out))
    proc = subprocess.run(command, input=record, capture_output=True, timeout=60)
    assert (proc.returncode, proc.stderr) == (0, b"")
    assert not (out / "index.html").exists()
    proc = subprocess.run(command, input=record + b"=\0" + record[1:], capture_output=True, timeout=60)
    assert (proc.returncode, proc.stderr) == (0, b"") and (out / "index.html").exists()


def test_a_stream_its_runner_never_wrote_is_left_out_and_the_page_still_drawn(tmp_path, capfd):
    """A job whose runner died before its first line (a Dask worker killed under it) leaves an
    empty stream: the page goes without it, and the batch's warning names it."""
    from processkit.batching.index import Index
    from processkit.batching.manifest import parse

    out = tmp_path / "out"
    fake_stream(out, "x", 0)
    os.makedirs(out / "y")
    (out / "y" / "events.jsonl").write_bytes(b"")
    jobs = parse([b'{"args": ["true"], "id": "x"}', b'{"args": ["true"], "id": "y"}'])
    Index(str(out)).finish(jobs)
    err = capfd.readouterr().err
    assert "no index.html" not in err
    assert f"index.html leaves out {out / 'y' / 'events.jsonl'} is not a processkit event stream: it is empty" in err
    assert page(out / "index.html") == report_of(out, ["x"], tmp_path)


def test_a_page_is_drawn_even_when_the_read_ahead_process_ended_early(tmp_path, capfd):
    """Killed, and its status taken by another reaper (a run's, which collects every child not
    a root): a fresh index process, given every path, draws the same page."""
    from processkit.batching.index import Index
    from processkit.batching.manifest import parse

    out = tmp_path / "out"
    for job_id in "xy":
        fake_stream(out, job_id, 0)
    jobs = parse([b'{"args": ["true"], "id": "x"}', b'{"args": ["true"], "id": "y"}'])
    index = Index(str(out))
    index._proc = index._start()
    assert index._proc is not None
    index._proc.kill()
    os.waitpid(index._proc.pid, 0)
    index.finish(jobs)
    assert "no index.html" not in capfd.readouterr().err
    assert page(out / "index.html") == report_of(out, ["x", "y"], tmp_path)


def test_a_pipe_whose_descriptor_is_no_longer_ours_is_never_written(tmp_path):
    """Closed behind the index's back and its number reused by another file: that file is left
    alone, and the page is still drawn (by a fresh process)."""
    from processkit.batching.index import Index
    from processkit.batching.manifest import parse

    out = tmp_path / "out"
    fake_stream(out, "x", 0)
    jobs = parse([b'{"args": ["true"], "id": "x"}'])
    index = Index(str(out))
    index._proc = index._start()
    feed = index._feed
    os.close(feed)
    bystander = os.open(tmp_path / "bystander", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        if bystander != feed:
            os.dup2(bystander, feed)  # the same number, another file
        index.add(jobs[0])
        index._flush()
        index.finish(jobs)
        assert (tmp_path / "bystander").read_bytes() == b""
        assert os.fstat(feed)  # still open: not closed as if it were the pipe
    finally:
        os.close(bystander)
        if bystander != feed:
            os.close(feed)
    assert page(out / "index.html") == report_of(out, ["x"], tmp_path)


def test_the_index_process_runs_this_processkit_whatever_the_working_directory_holds(tmp_path):
    """A batch started from inside another checkout (its own ``processkit`` package) still
    gets its page from this processkit."""
    elsewhere = tmp_path / "checkout"
    (elsewhere / "processkit" / "batching").mkdir(parents=True)
    for name in ("processkit/__init__.py", "processkit/batching/__init__.py", "processkit/batching/index.py"):
        (elsewhere / name).write_text("raise SystemExit(0)\n")  # a version that draws nothing
    out = tmp_path / "out"
    manifest = write(tmp_path / "m.jsonl", [{"args": ["true"], "id": "a"}, {"args": ["true"], "id": "b"}])
    proc = run_cli("batch", manifest, "--out", str(out), "--jobs", "2", cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr
    assert page(out / "index.html") == report_of(out, "ab", tmp_path)


def test_an_abandoned_index_ends_its_process_without_a_page(tmp_path):
    from processkit.batching.index import Index
    from processkit.batching.manifest import parse

    out = tmp_path / "out"
    fake_stream(out, "x", 0)
    index = Index(str(out))
    index._proc = index._start()
    proc = index._proc
    index.add(parse([b'{"args": ["true"], "id": "x"}'])[0])
    index.abandon()  # as when the batch raises (KeyboardInterrupt in the API)
    assert proc is not None and proc.returncode == 0 and index._feed == -1
    assert not (out / "index.html").exists()
