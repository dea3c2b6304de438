"""A checked manifest read again as its jobs start: what that second read holds and what it
accepts. Process-level: the real CLI and real children; a job of the batch changes the manifest
while the batch runs (with ``--jobs 1`` the next block is read only after that job ended)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from conftest import cli_command

SETUP_FAILED = 111


def _peak_rss_kib(argv: list[str]) -> int:
    """The largest peak RSS among ``argv``'s process and its descendants (KiB), measured in a
    fresh interpreter so no earlier child of this one counts."""
    probe = (
        "import resource, subprocess, sys; "
        "done = subprocess.run(sys.argv[1:], stdin=subprocess.DEVNULL, capture_output=True); "
        "assert done.returncode == 0, done.stderr[-2000:]; "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    done = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def _big_lines(path, count: int) -> None:
    """``count`` jobs of ~256 KiB lines: each an argv of 40,000 short words (some 3 MiB of
    Python objects once parsed)."""
    words = [f"w{n:05d}" for n in range(40_000)]
    with open(path, "w") as out:
        for number in range(count):
            out.write(json.dumps({"args": ["true", *words], "id": f"j{number:02d}"}) + "\n")


def test_a_batch_of_long_lines_holds_one_parsed_job_ahead_not_a_block_of_them(tmp_path):
    """The jobs are read ahead 32 lines at a time, but a block ends once its lines pass 64 KiB:
    40 long lines peak where 2 do (before, 32 parsed jobs were held at once: ~100 MiB more)."""
    peaks = {}
    for count in (2, 40):
        manifest = tmp_path / f"big{count}.jsonl"
        _big_lines(manifest, count)
        peaks[count] = _peak_rss_kib(
            [*cli_command(), "batch", str(manifest), "--jobs", "1", "--out", str(tmp_path / f"o{count}")]
        )
    grown = peaks[40] - peaks[2]
    assert grown < 40 * 1024, f"peak RSS {peaks}: {grown // 1024} MiB more for 38 more long lines"


def _padded(job: dict, width: int = 1024) -> str:
    text = json.dumps(job)
    return text + " " * (width - 1 - len(text)) + "\n"


def _run(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*cli_command(), *map(str, args)], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )


def _ids(out) -> list[str]:
    return [json.loads(line)["id"] for line in (out / "summary.jsonl").read_text().splitlines()]


def test_a_manifest_cut_during_the_batch_fails_it_naming_the_jobs_read(tmp_path):
    """The first job cuts the manifest at a line boundary (line 100 of 200, past what the first
    reads hold): the batch ends as for a line changed since its check (the setup failure, 111)
    saying how many of its jobs it read, not 0 with the rest silently dropped."""
    path = tmp_path / "m.jsonl"
    lines = [_padded({"args": ["true"], "id": f"j{number:03d}"}) for number in range(1, 201)]
    lines[0] = _padded(
        {"args": [sys.executable, "-c", f"import os; os.truncate({str(path)!r}, {100 * 1024})"], "id": "j001"}
    )
    path.write_text("".join(lines))
    done = _run("batch", path, "--jobs", "1", "--out", tmp_path / "out")
    assert done.returncode == SETUP_FAILED, done.stderr[-2000:]
    found = re.search(r"the manifest changed since it was checked: it ends after (\d+) of its 200 jobs", done.stderr)
    assert found, done.stderr[-2000:]
    ran = _ids(tmp_path / "out")
    assert len(ran) == int(found.group(1)) < 200
    assert ran == [f"j{number:03d}" for number in range(1, len(ran) + 1)]


def test_a_job_appended_during_the_batch_never_starts_unchecked(tmp_path):
    """The first job appends a line whose id is another job's: that line was never checked, so
    it is the manifest changed since its check (111), raised before it starts; every checked job
    ran once."""
    path = tmp_path / "m.jsonl"
    lines = [json.dumps({"args": ["true"], "id": f"j{number:02d}"}) + "\n" for number in range(1, 81)]
    appended = json.dumps({"args": ["true"], "id": "j03"}) + "\n"
    append = f"open({str(path)!r}, 'a').write({appended!r})"
    lines[0] = json.dumps({"args": [sys.executable, "-c", append], "id": "j01"}) + "\n"
    path.write_text("".join(lines))
    done = _run("batch", path, "--jobs", "1", "--out", tmp_path / "out")
    assert done.returncode == SETUP_FAILED, done.stderr[-2000:]
    assert "the manifest changed since it was checked: manifest line 81: a job past the 80 it held" in done.stderr
    assert sorted(_ids(tmp_path / "out")) == [f"j{number:02d}" for number in range(1, 81)]


@pytest.mark.parametrize("appended", ['{"args": [\n', '{"args": ['], ids=["line", "no-newline"])
def test_a_line_appended_during_the_batch_that_is_not_json_is_named_a_job_past_the_count(tmp_path, appended):
    """The first job appends a line that does not decode (a job caught in the middle of its
    writing, its newline written or not): that line is past the jobs checked whatever it holds,
    so the failure (111) says so, not that line's JSON error; every checked job ran once."""
    path = tmp_path / "m.jsonl"
    lines = [json.dumps({"args": ["true"], "id": f"j{number:02d}"}) + "\n" for number in range(1, 81)]
    append = f"open({str(path)!r}, 'a').write({appended!r})"
    lines[0] = json.dumps({"args": [sys.executable, "-c", append], "id": "j01"}) + "\n"
    path.write_text("".join(lines))
    done = _run("batch", path, "--jobs", "1", "--out", tmp_path / "out")
    assert done.returncode == SETUP_FAILED, done.stderr[-2000:]
    assert "the manifest changed since it was checked: manifest line 81: a job past the 80 it held" in done.stderr, (
        done.stderr[-2000:]
    )
    assert "not JSON" not in done.stderr
    assert sorted(_ids(tmp_path / "out")) == [f"j{number:02d}" for number in range(1, 81)]
