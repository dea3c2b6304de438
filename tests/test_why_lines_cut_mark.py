"""A line the failures' list and the JUnit show is kept at most 1 KiB: a pytest assertion of
5 KB (`E   AssertionError: assert 'long text' == ...`) ended at its 1024th byte in the JUnit
failure text with nothing after it, as if that were the whole line, and a first line of a
progress bar redrawn 200000 times showed its 14th redraw as it stood at that byte (a download
that seemed to stop at 14 of 200000). The cut is now said after the kept bytes, as a line
longer than a piece already said its own: with the bytes cut counted where the whole line was
read, `[the rest of it cut]` where only its start was."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from conftest import run_cli
from streams import PY

BATCH_FAILED = 117
LONG_WHY = (
    "import sys; print('start'); print('E   AssertionError: assert ' + 'v' * 5000 + ' == 2'); "
    "print('\\n'.join('filler %d' % i for i in range(40))); sys.exit(1)"
)
# a first line longer than the search's 1 MiB piece: only its start is read for the head
PROGRESS = (
    "import sys; w = sys.stdout.write\n"
    "for i in range(40000): w('\\rdownloading %6d/40000 [' % i + '#' * 40 + ']')\n"
    "w('\\n'); print('\\n'.join('line %d' % i for i in range(12))); sys.exit(1)"
)


def _failure(tmp_path, code: str) -> tuple[str, str]:
    """The job's JUnit failure text and the batch's stderr."""
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps({"id": "job", "args": [PY, "-c", code]}) + "\n")
    junit = tmp_path / "junit.xml"
    result = run_cli("batch", path, "--out", tmp_path / "out", "--junit", junit, cwd=tmp_path)
    assert result.returncode == BATCH_FAILED, result.stderr
    return ET.parse(junit).getroot().find(".//failure").text, result.stderr.decode()


def test_a_why_line_cut_at_its_kept_bytes_says_how_much_was_cut(tmp_path):
    failure, _ = _failure(tmp_path, LONG_WHY)
    line = next(text for text in failure.splitlines() if text.startswith("E   AssertionError"))
    whole = len("E   AssertionError: assert ") + 5000 + len(" == 2")
    kept = "E   AssertionError: assert " + "v" * (1024 - len("E   AssertionError: assert "))
    assert line == f"{kept} [{(whole - 1024) / 1024:.1f} KiB more of it cut]", line[-80:]


def test_a_first_line_longer_than_a_piece_says_its_rest_was_cut(tmp_path):
    failure, stderr = _failure(tmp_path, PROGRESS)
    head = failure.splitlines()[1:3]  # after the block's own line saying what is shown
    assert head[-1].endswith(" [the rest of it cut]"), head
    listed = [line for line in stderr.splitlines() if line.startswith("    | ")]
    assert listed[1].endswith(" [the rest of it cut]") and listed[2] == "    | line 0", stderr


# a line of a --pty job ends in CRLF: its carriage return is no byte of the line shown
CRLF_WHY = (
    "import sys; w = sys.stdout.write; print('start')\n"
    "w('E   AssertionError: ' + 'v' * (1024 - 20) + '\\r\\n')\n"
    "w('E   AssertionError: ' + 'w' * (1025 - 20) + '\\r\\n')\n"
    "print('\\n'.join('filler %d' % i for i in range(400))); sys.exit(1)"
)


def test_a_closing_carriage_return_neither_cuts_a_line_nor_is_counted(tmp_path):
    failure, _ = _failure(tmp_path, CRLF_WHY)
    lines = [text for text in failure.splitlines() if text.startswith("E   AssertionError")]
    assert lines[0] == "E   AssertionError: " + "v" * (1024 - 20), lines[0][-40:]  # whole: no mark
    assert lines[1] == "E   AssertionError: " + "w" * (1024 - 20) + " [1 B more of it cut]", lines[1][-40:]
