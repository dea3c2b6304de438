"""A failed job's JUnit ``failure`` text is what a CI reporter shows of it (a check run's
annotation, the test tab's message): it held the stderr's last lines alone, so a pytest shard,
whose ``FAILED`` line is on stdout with nothing on stderr, got an empty failure, and a cargo
test, its progress on stderr and the failing test on stdout, got the progress."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from conftest import run_cli
from streams import PY

BATCH_FAILED = 117
PYTEST_LIKE = "print('FAILED tests/test_x.py::test_y - assert 1 == 2'); raise SystemExit(1)"
CARGO_LIKE = (
    "import sys; print('   Compiling app v0.1.0', file=sys.stderr); "
    "print('test tests::adds ... FAILED'); raise SystemExit(101)"
)


def _cases(tmp_path, jobs: list[dict], *flags: str) -> dict:
    """The JUnit test cases, by name, of a batch of ``jobs`` (one at least failing)."""
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    junit = tmp_path / "junit.xml"
    result = run_cli("batch", path, "--out", tmp_path / "out", *flags, "--junit", junit)
    assert result.returncode == BATCH_FAILED, result.stderr
    return {case.get("name"): case for case in ET.parse(junit).getroot().iter("testcase")}


def test_a_failure_text_holds_the_stdout_where_the_error_is(tmp_path):
    jobs = [
        {"id": "shard-1", "args": [PY, "-c", PYTEST_LIKE]},
        {"id": "cargo", "args": [PY, "-c", CARGO_LIKE]},
        {"id": "quiet", "args": [PY, "-c", "raise SystemExit(2)"]},
    ]
    cases = _cases(tmp_path, jobs, "--keep", "failed")
    failure = cases["shard-1"].find("failure")
    assert failure.get("message") == "exit 1"
    assert failure.text == "FAILED tests/test_x.py::test_y - assert 1 == 2\n", failure.text
    text = cases["cargo"].find("failure").text
    assert text == "[stdout]\ntest tests::adds ... FAILED\n[stderr]\n   Compiling app v0.1.0\n", text
    assert cases["cargo"].find("system-out").text == "test tests::adds ... FAILED\n"
    assert cases["quiet"].find("failure").text == "[no output on stdout or stderr]"  # not an empty block


BLANK_OUT = "import sys; print('\\x1b[0m\\n\\n  '); print('boom', file=sys.stderr); raise SystemExit(1)"
NO_TEXT = "import sys; print('\\x1b]0;title\\x07'); sys.stderr.write('\\x1b[31m\\x1b[0m\\n'); raise SystemExit(1)"


def test_a_blank_capture_gets_no_labelled_block(tmp_path):
    """A capture of blank lines or terminal sequences alone (a colour reset, a title) showed as a
    ``[stdout]`` block of nothing beside stderr's error, and as an empty ``system-out``; a job
    whose captures show no text at all had an empty ``failure``. A blank capture is now left out
    as an empty one is, and a failure with nothing to show says so."""
    jobs = [
        {"id": "blank-out", "args": [PY, "-c", BLANK_OUT]},
        {"id": "no-text", "args": [PY, "-c", NO_TEXT]},
        {"id": "passes", "args": [PY, "-c", "print(); print('  ')"]},
    ]
    cases = _cases(tmp_path, jobs)
    assert cases["blank-out"].find("failure").text == "boom\n"
    assert cases["blank-out"].find("system-out") is None
    assert cases["blank-out"].find("system-err").text == "boom\n"
    no_text = cases["no-text"].find("failure").text
    assert no_text == "[no text on stdout or stderr: blank lines or terminal sequences alone]", no_text
    assert cases["no-text"].find("system-out") is None and cases["no-text"].find("system-err") is None
    assert cases["passes"].find("system-out") is None


def test_a_capture_that_cannot_be_read_is_said_so_not_taken_for_no_text(tmp_path):
    """A capture that held bytes and is gone by the report (the job removed its own file) read
    as a capture of blank lines: the failure says it could not be read, and where from."""
    capture = tmp_path / "out" / "gone" / "capture" / "stdout.log"
    removes = "import os, sys; print('hello', flush=True); os.remove(sys.argv[1]); raise SystemExit(1)"
    cases = _cases(tmp_path, [{"id": "gone", "args": [PY, "-c", removes, str(capture)]}])
    text = cases["gone"].find("failure").text
    assert text == f"[its 6 B of stdout could not be read from {capture}]\n", text


def test_a_blank_capture_cut_at_its_cap_keeps_the_cut_note(tmp_path):
    """Blank lines past ``capture_max_bytes``: no block of nothing, but the note that the file
    is not the whole stream stays, as for a capture with text."""
    blank = {"id": "blank", "capture_max_bytes": 100, "args": [PY, "-c", "print('\\n' * 1000); raise SystemExit(1)"]}
    text = _cases(tmp_path, [blank])["blank"].find("failure").text
    assert text.startswith("[cut at capture_max_bytes: 100 B of 1001 B kept: ") and text.count("\n") == 1, text
