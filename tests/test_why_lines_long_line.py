"""A failed job's capture line longer than the search's piece (1 MiB), in the closing block and
the JUnit ``failure`` text. Its rest, in the next piece, was searched as if it began a line, so
an ``Error: `` in its middle was shown as a line of its own (tidy71); then such a line was not
searched at all, so a test runner's one-line JSON report holding ``AssertionError: ...`` showed
nothing of it (why72). Its start is now matched as any line's, else its bytes are searched for a
word that says why and a part around the first shown, what was cut before and after it said.
Its start is among the first lines shown where none says why; its rest never is. A part cut
inside a UTF-8 character shows no U+FFFD beside the note that says what was cut."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from conftest import run_cli
from streams import PY
from test_batch_failures import BATCH_FAILED, failure_block

PLAIN = "out.write(b''.join(b'plain %d\\n' % n for n in range(1, 11))); "
# a 2 MiB line, then ``Error: x`` at the start of the third 1 MiB piece, in the middle of that line
LONG_LINE_JOB = (
    "import sys; out = sys.stdout.buffer; "
    "out.write(b'x' * (2 << 20) + b'Error: x, not a line of its own' + b'y' * 100 + b'\\n'); " + PLAIN + "sys.exit(1)"
)
# a test runner's report, one line of JSON: the failing test's message 2 MiB in (or 488 KiB: the
# line, 1.5 MiB, then read whole with the next piece), 1 MiB after it
JSON_JOB = (
    "import sys; out = sys.stdout.buffer; passed = int(sys.argv[1]); "
    'out.write(b\'{"passed": [\' + b\'"t", \' * passed + b\'"t"], "failed": [{"message": \''
    "b'\"AssertionError: expected 1 to equal 2\"}], \"log\": \"' + b'z' * (1 << 20) + b'\"}\\n'); sys.exit(1)"
)
# no line says why: the first line, then a 2 MiB line whose rest would read as a line's start (its
# first 1 KiB ends inside a character)
HEAD_JOB = (
    "import sys; out = sys.stdout.buffer; "
    "out.write(b'first\\n' + b'w' + '\\u00e9'.encode() * (1 << 20) + b'rest-of-the-long-line\\n'); "
    "out.write(b''.join(b'plain %d\\n' % n for n in range(1, 21))); sys.exit(1)"
)
# one line of 2-byte characters, its ends odd: every cut (the JUnit's kept ends, its last 4 KiB)
# falls inside a character
UTF8_JOB = "import sys; sys.stdout.buffer.write(b'a' + '\\u00e9'.encode() * 600000 + b'b'); sys.exit(1)"


def _batch(tmp_path, code: str, *args: str) -> tuple[list[str], ET.Element]:
    """The closing block's lines and the JUnit test case of a batch of one job running ``code``
    (``args`` its arguments)."""
    junit = tmp_path / "junit.xml"
    proc = run_cli(
        "batch", "--out", tmp_path / "out", "--junit", junit, "--", PY, "-c", code, *args, ":::", "a", cwd=tmp_path
    )
    assert proc.returncode == BATCH_FAILED, proc.stderr
    return failure_block(proc.stderr), next(ET.parse(junit).getroot().iter("testcase"))


def test_an_error_in_the_middle_of_a_long_line_is_shown_as_a_part_of_it(tmp_path):
    block, case = _batch(tmp_path, LONG_LINE_JOB)
    assert "its 1 line(s) that say why and its last 5 line(s)" in block[2], block
    assert block[3].startswith("    | [2 MiB of this line cut] " + "x" * 64 + "Error: x, not a line of its own"), block
    assert not any(line.startswith("    | Error: x") for line in block), block  # not a line of its own
    assert block[-6:-1] == [f"    | plain {n}" for n in range(6, 11)], block
    failure = case.find("failure").text  # the line's part: not all it printed
    assert failure.startswith("[its 1 line(s) that say why and its last 10 line(s) of the 2 MiB in "), failure
    assert "\n[2 MiB of this line cut] " + "x" * 64 + "Error: x, not a line of its own" + "y" * 100 + "\n" in failure, (
        failure
    )
    assert "\nError: x" not in failure, failure


@pytest.mark.parametrize(("passed", "before"), [(419430, "2 MiB"), (100000, "488.3 KiB")], ids=["3-MiB", "1.5-MiB"])
def test_a_one_line_json_report_shows_the_failing_message_with_what_was_cut(tmp_path, passed, before):
    block, case = _batch(tmp_path, JSON_JOB, str(passed))
    assert "(its 1 line(s) that say why of " in block[2], block  # the one line, once: no last line
    said = re.escape(f"[{before} of this line cut]")
    assert re.fullmatch(rf'    \| {said} .*"message": "AssertionError: expected 1 to equal 2.*', block[3]), block
    failure = case.find("failure").text
    part = re.search(rf'\n{said} [^\n]*"AssertionError: expected 1 to equal 2"[^\n]*\n', failure)
    assert part is not None, failure[:2000]
    assert re.search(r" \[(1023\.\d|1024(\.0)?) KiB more of it cut\]\n$", part.group()), part.group()


def test_a_long_line_among_the_first_lines_shows_its_start_and_never_its_rest(tmp_path):
    block, case = _batch(tmp_path, HEAD_JOB)
    assert "its first 5 and last 5 line(s)" in block[2], block
    assert block[3:5] == ["    | first", "    | w" + "\u00e9" * 196 + "..."], block
    assert block[5:9] == ["    | plain 1", "    | plain 2", "    | plain 3", "    ... 12 lines not shown"], block
    assert not any("rest-of-the-long-line" in line for line in block), block
    failure = case.find("failure").text.splitlines()
    # to a character's end, the cut said (tests/test_why_lines_cut_mark.py)
    assert failure[1:3] == ["first", "w" + "\u00e9" * 511 + " [the rest of it cut]"], failure[:4]
    assert failure[3:6] == ["plain 1", "plain 2", "plain 3"], failure[:7]
    assert not any(line.startswith("rest-of-the-long-line") for line in failure), failure


def test_a_part_cut_inside_a_character_shows_no_replacement_character(tmp_path):
    _, case = _batch(tmp_path, UTF8_JOB)
    out, failure = case.find("system-out").text, case.find("failure").text
    assert "\ufffd" not in out and "\ufffd" not in failure, [
        text[max(0, text.find("\ufffd") - 40) : text.find("\ufffd") + 40] for text in (out, failure)
    ]
    head, note, tail = out.split("\n")[1:4]
    assert head == "a" + "\u00e9" * 262143 and note.startswith("[... 147.9 KiB left out here, after byte 524287:"), note
    assert tail == "\u00e9" * 262143 + "b", tail[:10]
    assert failure.splitlines()[1:] == ["..." + "\u00e9" * 2047 + "b"], failure[-60:]  # its last 4 KiB


# a progress line 2 MiB long redrawn by carriage returns, an error drawn in it, then longer
# redraws: the piece with the error shown, one line, with what was cut before and after it
REDRAWN_JOB = (
    "import sys; out = sys.stderr.buffer; "
    "out.write(b'x' * (2 << 20) + b'\\rError: boom happened\\r' + b'p' * 3000 + b'\\n'); sys.exit(1)"
)


def test_an_error_redrawn_over_in_a_long_line_is_shown_with_what_was_cut(tmp_path):
    block, case = _batch(tmp_path, REDRAWN_JOB)
    assert "(its 1 line(s) that say why of " in block[2], block  # the one line, once: no last line
    assert block[3] == "    | [2 MiB of this line cut] Error: boom happened [2.9 KiB more of it cut]", block
    failure = case.find("failure").text
    assert "\n[2 MiB of this line cut] Error: boom happened [2.9 KiB more of it cut]\n" in failure, failure[:2000]


def test_a_long_line_redrawn_before_its_error_counts_one_line(tmp_path):
    code = (
        "import sys; out = sys.stderr.buffer; "
        "out.write(b'5%|#' * (1 << 19) + b'progress\\rTraceback: it broke' + b'q' * 2000 + b'\\n'); sys.exit(1)"
    )
    block, _ = _batch(tmp_path, code)
    assert "(its 1 line(s) that say why of " in block[2], block  # its end's pieces not again as last lines
    assert block[3].startswith("    | [2 MiB of this line cut] Traceback: it brokeqqq"), block


@pytest.mark.parametrize("ys", [(3 << 20) - 20, (3 << 20) - 9], ids=["near-a-piece-end", "at-a-piece-start"])
def test_a_long_line_part_is_1_kib_from_64_bytes_before_its_word_across_pieces(tmp_path, ys):
    code = (
        "import sys; out = sys.stdout.buffer; ys = int(sys.argv[1]); "
        "out.write(b'y' * ys + b' AssertionError: expected 1 to equal 2' + b'z' * 5000 + b'\\nlast\\n'); sys.exit(1)"
    )
    block, case = _batch(tmp_path, code, str(ys))
    said = "[3 MiB of this line cut] " + "y" * 54 + " AssertionError: expected 1 to equal 2"
    assert block[3].startswith("    | " + said + "zzz"), block
    assert f"\n{said}{'z' * 932} [4 KiB more of it cut]\nlast\n" in case.find("failure").text, block


def test_a_last_line_that_says_why_is_shown_and_counted_once(tmp_path):
    """A 5 KiB ``AssertionError`` line, a file's last of three, was both a line that says why and
    the last line (the tail's read began inside it): shown twice, its start then its end, under
    ``its 2 line(s) that say why and its last 1 line(s)``, four lines of a three-line file."""
    block, case = _batch(tmp_path, "assert 1 == 2, 'E' + 'y' * 5000 + 'END'")
    assert block[2].endswith(" (its 2 line(s) that say why of 5 KiB shown)"), block
    assert block[3] == "    | Traceback (most recent call last):", block
    assert block[4] == "    ... 1 line not shown", block
    assert block[5].startswith("    | AssertionError: Eyyy"), block
    assert len(block) == 7 and not any("END" in line for line in block), block
    failure = case.find("failure").text
    assert failure.startswith("[its 2 line(s) that say why of the 5 KiB in "), failure[:300]
    assert failure.count("AssertionError") == 1 and "yyyEND" not in failure, failure
