"""The batch's page process reads ``summary.jsonl`` while the jobs still run (``Summary.early``),
so that at the end only the rest is read; the page it draws is byte for byte the page a whole
read draws: whatever the lines hold (every state, odd characters, an ESC, long ids, a torn line,
lines over their bound, a job's later line), wherever the early reads stopped (mid-line too),
and when the file read early is emptied and written again (a new batch into the same ``--out``).

``python tests/test_batch_page_early.py FILE`` writes the page of the varied summary as the
``processkit`` on the path draws it, its clock fixed: run it with the tree before a change to the
page's draw and after, and compare the two files (bench/README.md, issue 49, page71)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys

import pytest

ODD = "a<b>&\"c'\x1b[31mred\u202etxt\x07 é 漢"
RETRIED = {
    "attempt": 1,
    "dir": "x",
    "started_at": "2026-12-07T10:00:01Z",
    "exit_code": 1,
    "source": "child_exit",
    "duration_ms": 2.0,
}
TAIL = b"compiling\n\x1b[31merror\x1b[0m: <bad> & 'worse'\n\x00nul\rover\n"


def _started(second: int) -> str:
    return f"2026-12-07T10:00:{second:02d}.{second * 1379 % 1_000_000:06d}Z"


def _captured(out, job_id: str, data: bytes | None) -> dict:
    """A job's capture object, its stderr file written when ``data`` is given."""
    if data is None:
        empty = hashlib.sha256(b"").hexdigest()
        stream = {"path": None, "bytes": 0, "bytes_seen": 0, "bytes_written": 0, "sha256": empty}
        return {"stdout": stream, "stderr": stream}
    os.makedirs(os.path.join(out, job_id, "capture"), exist_ok=True)
    with open(os.path.join(out, job_id, "capture", "stderr.log"), "wb") as handle:
        handle.write(data)
    stderr = {
        "path": f"{out}/{job_id}/capture/stderr.log",
        "bytes": len(data),
        "bytes_seen": len(data),
        "bytes_written": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "truncated": False,
        "write_error": False,
    }
    return {"stdout": None, "stderr": stderr}


def varied(out) -> list[bytes]:
    """A summary's lines holding every state a page draws, and lines that hold no job."""
    lines: list[dict | str] = []
    states = [
        (0, "child_exit", None, {}),
        (3, "child_exit", None, {}),
        (137, "timeout", None, {}),
        (124, "idle_timeout", None, {}),
        (143, "cancelled", 15, {}),
        (None, "halted", None, {"message": "the batch halted: <first failure>"}),
        (None, "skipped", None, {"skipped_for": "dep & co"}),
        (None, "task_failed", None, {"message": "the Dask task was lost"}),
        (0, "child_exit", None, {"flaky": True, "attempts": 2}),
        (9, "child_exit", 9, {"oom_kills": 1, "leaked": 2}),
    ]
    for number in range(60):
        code, source, signal, told = states[number % len(states)]
        extra = dict(told)
        job_id = [f"job-{number}", f"{ODD}-{number}", "long-" + "x" * 240 + str(number), f"a/b/{number}"][number % 4]
        line = {
            "id": job_id,
            "run_id": f"run-{number}",
            "command": ["sh", "-c", f"echo {ODD} $((1 + {number}))", *(["arg"] * (number % 40))],
            "started_at": None if code is None else _started(number % 50),
            "exit_code": code,
            "source": source,
            "duration_ms": None if code is None else 1.5 + number * 13.25,
            "attempts": extra.pop("attempts", 1 if code is not None else 0),
            "resources": {"peak_memory_bytes": 4096 * number or None, "total_cpu_ms": number % 7},
            "capture": _captured(out, job_id, TAIL + ODD.encode() if code not in (0, None) else None),
            "message": extra.pop("message", None),
            "signal": signal,
            "needs": [f"need-{n}" for n in range(number % 13)],
            "earlier_attempts": [RETRIED] if extra.get("flaky") else [],
            **extra,
        }
        lines.append(line)
    lines[5:5] = ["not json", json.dumps([1, 2]), "x" * (1024 * 1024 + 5)]  # no job's lines, one over its bound
    lines.append({**lines[0], "exit_code": 2, "duration_ms": 99.0})  # a job's later line wins
    return [(line if isinstance(line, str) else json.dumps(line)).encode() + b"\n" for line in lines]


def _drawn(out, summary=None, gone=frozenset()) -> bytes:
    from processkit.report import batch_page
    from processkit.report.batch_model import load

    return batch_page.batch_page(load(str(out), gone, summary)).encode()


@pytest.fixture
def fixed_clock(monkeypatch):
    from processkit.report import batch_page

    monkeypatch.setattr(batch_page, "_now", lambda: "2026-12-07 10:00:00 UTC")


def _cuts(lines: list[bytes], how: str) -> list[int]:
    """Where the early reads fall: a byte either side of each line's end, or every so many bytes."""
    size = sum(map(len, lines))
    if how == "ends":
        ends = [sum(map(len, lines[: n + 1])) for n in range(len(lines))]
        return sorted({at + d for at in ends for d in (-1, 0, 1) if 0 < at + d < size})
    return list(range(int(how), size, int(how)))


@pytest.mark.parametrize("how", ["ends", "997", "300007"])
def test_a_summary_read_early_in_pieces_draws_the_page_a_whole_read_draws(tmp_path, fixed_clock, how):
    from processkit.report.batch_model import Summary

    out = tmp_path / "out"
    out.mkdir()
    lines = varied(out)
    data = b"".join(lines) + b'{"id": "torn", "exit_code'  # a last line never ended
    summary = Summary(str(out))
    with open(out / "summary.jsonl", "wb", buffering=0) as handle:
        done = 0
        for at in [*_cuts(lines, how), len(data)]:  # each piece cut wherever it falls, mid-line too
            handle.write(data[done:at])
            done = at
            summary.early()
    gone = frozenset({"job-4", "job-8"})
    whole = _drawn(out, gone=gone)
    assert _drawn(out, summary, gone) == whole
    assert b"job-4<" not in whole and b"job-12<" in whole and b"4 summary lines skipped" in whole


def test_a_summary_emptied_and_written_again_after_an_early_read_is_read_again_whole(tmp_path, fixed_clock):
    from processkit.report.batch_model import MAX_LINE_BYTES, Summary

    out = tmp_path / "out"
    out.mkdir()
    lines = [line for line in varied(out) if len(line) <= MAX_LINE_BYTES]  # none stops the early read
    summary = Summary(str(out))
    (out / "summary.jsonl").write_bytes(b"".join(lines[:40]))  # an earlier batch's, read early
    summary.early()
    assert summary._count == 40
    rewritten = lines[20].replace(b'"exit_code": 0', b'"exit_code": 5')  # inside what was read early
    assert len(rewritten) == len(lines[20]) and rewritten != lines[20]
    (out / "summary.jsonl").write_bytes(b"".join([*lines[:20], rewritten, *lines[21:]]))  # the same size there
    assert _drawn(out, summary) == _drawn(out)


def test_a_summary_grown_past_its_lines_bound_after_an_early_read_is_refused_as_whole(tmp_path, monkeypatch):
    from processkit.errors import Failure
    from processkit.report import batch_model

    monkeypatch.setattr(batch_model, "PAGE_LINES", 4)
    out = tmp_path / "out"
    out.mkdir()
    lines = varied(out)
    summary = batch_model.Summary(str(out))
    (out / "summary.jsonl").write_bytes(b"".join(lines[:3]))
    summary.early()
    (out / "summary.jsonl").write_bytes(b"".join(lines[:6]))
    summary.early()
    with pytest.raises(Failure) as early:
        batch_model.load(str(out), summary=summary)
    with pytest.raises(Failure) as whole:
        batch_model.load(str(out))
    assert early.value.message == whole.value.message and "more than 4 lines" in whole.value.message


def test_the_lines_past_the_early_bound_are_left_to_the_end(tmp_path, fixed_clock, monkeypatch):
    """Past ``EARLY_LINES`` the page process holds no more while the jobs run: the rest is read
    at the end, the page the same."""
    from processkit.report import batch_model

    monkeypatch.setattr(batch_model, "EARLY_LINES", 10)
    out = tmp_path / "out"
    out.mkdir()
    lines = [line for line in varied(out) if len(line) <= batch_model.MAX_LINE_BYTES]
    summary = batch_model.Summary(str(out))
    (out / "summary.jsonl").write_bytes(b"".join(lines[:30]))
    assert summary.early()
    (out / "summary.jsonl").write_bytes(b"".join(lines))
    assert not summary.early()
    assert summary._count == 10 and len(summary.last) + summary.skipped == 10
    assert _drawn(out, summary) == _drawn(out)


def test_a_line_that_stops_the_early_read_is_not_read_again_until_the_summary_grows(tmp_path):
    """A line over its bound stops the early reads (left to the end); the looks after it, the
    file's size unchanged, read nothing (the same bytes rewritten so that a read would now go
    on count none), and once the size grows it is read again."""
    from processkit.report.batch_model import MAX_LINE_BYTES, Summary

    out = tmp_path / "out"
    out.mkdir()
    head = b"".join(varied(out)[:3])
    long = b"x" * (MAX_LINE_BYTES + 5) + b"\n"
    (out / "summary.jsonl").write_bytes(head + long)
    summary = Summary(str(out))
    assert summary.early() and summary._count == 3
    ended = b'{"id": "z"}\n'  # the same size: a re-read would take the long line's bytes as lines
    (out / "summary.jsonl").write_bytes(head + b" " * (len(long) - len(ended) - 1) + b"\n" + ended)
    assert not summary.early() and summary._count == 3
    with open(out / "summary.jsonl", "ab") as handle:
        handle.write(ended)
    assert summary.early() and summary._count == 6


def test_the_page_a_batch_draws_while_its_jobs_run_is_the_page_report_draws(tmp_path):
    """A real batch whose jobs run past the page process's first early reads: its index.html is
    the page ``report`` draws of the directory afterwards, the clock's line aside."""
    from conftest import reaped, run_cli, start_cli
    from streams import wait_until

    out = tmp_path / "out"
    gate = tmp_path / "gate"
    jobs = [{"args": ["sh", "-c", f"printf '<%s> &\\033[31m' {n} >&2; exit {n % 3}"], "id": f"j{n}"} for n in range(30)]
    jobs.append({"args": ["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done"], "id": "last"})
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    summary = out / "summary.jsonl"
    with reaped(start_cli("batch", manifest, "--out", out, "--jobs", "2", cwd=tmp_path)) as batch:
        # the quick jobs' lines are there, and read early, before the last job may end
        wait_until(lambda: summary.exists() and summary.read_bytes().count(b"\n") >= 30, what="30 lines")
        gate.write_text("")
        _, stderr = batch.communicate(timeout=120)
    assert batch.returncode == 117, stderr
    target = tmp_path / "report.html"
    proc = run_cli("report", out, "-o", target, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    stamp = re.compile(rb"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC")
    assert stamp.sub(b"T", (out / "index.html").read_bytes()) == stamp.sub(b"T", target.read_bytes())


def _voluntary_switches(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        return int(next(line for line in handle if line.startswith("voluntary_ctxt_switches:")).split()[1])


def test_the_page_process_of_a_batch_whose_job_runs_long_wakes_rarely(tmp_path):
    """While no line comes it backs off to a look every ``EARLY_MOST_MS``: its wake-ups (each a
    voluntary context switch, the poll's sleep) over a few seconds are about one a second after
    the short first waits, not ten (a look every ``EARLY_EVERY_MS``)."""
    import math
    import time

    from conftest import reaped, start_cli, wait_for_event
    from test_batch_index import page_processes

    from processkit.batching.index import EARLY_EVERY_MS, EARLY_MOST_MS

    out = tmp_path / "out"
    gate = tmp_path / "gate"
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"args": ["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done"], "id": "a"}))
    with reaped(start_cli("batch", manifest, "--out", out, cwd=tmp_path)) as batch:
        wait_for_event(out / "a" / "events.jsonl", "run_started")
        (page,) = page_processes(batch.pid)
        before, began = _voluntary_switches(page), time.monotonic()
        time.sleep(4)  # the span measured, not a wait for an event
        woke, took = _voluntary_switches(page) - before, time.monotonic() - began
        gate.write_text("")
        _, stderr = batch.communicate(timeout=120)
    assert batch.returncode == 0, stderr
    ramp = math.ceil(math.log2(EARLY_MOST_MS / EARLY_EVERY_MS)) + 1  # the short first waits
    bound = ramp + math.ceil(took * 1000 / EARLY_MOST_MS) + 3  # a few more: its start's own
    assert woke <= bound, (woke, bound, took)
    assert (out / "index.html").exists()


if __name__ == "__main__":  # the varied summary's page as the processkit on the path draws it
    import tempfile

    from processkit.report import batch_page

    batch_page._now = lambda: "2026-12-07 10:00:00 UTC"
    place = os.path.join(tempfile.mkdtemp(), "out")
    os.mkdir(place)
    with open(os.path.join(place, "summary.jsonl"), "wb") as handle:
        handle.write(b"".join(varied(place)))
    with open(sys.argv[1], "wb") as handle:
        handle.write(batch_page.page_for(place, frozenset({"job-4"})).encode().replace(place.encode(), b"OUT"))
