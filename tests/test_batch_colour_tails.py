"""A job run with colour forced (``FORCE_COLOR=1``, ``--color=yes``, as CI logs are often made
colourful) writes its failure with escape sequences: the closing block showed each ESC as a
space, ``[31mFAILED [0m tests/x.py:: [1mtest_y [0m``, which a grep for the test's id in the CI
log misses, and the JUnit failure as U+FFFD and the same residue. Both now show the text a
terminal shows (the page already drew the colours): ``FAILED tests/x.py::test_y - boom``."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from conftest import run_cli
from streams import PY

BATCH_FAILED = 117
COLOURED = (
    "import sys; sys.stdout.write('\\x1b[1m== 1 failed ==\\x1b[0m\\n"
    "\\x1b[31mFAILED\\x1b[0m tests/x.py::\\x1b[1mtest_y\\x1b[0m - boom\\x1b[K\\n'); sys.exit(1)"
)


def _failed(tmp_path, job: str, source: str):
    """The closing block's tail lines and the JUnit test case of a batch of one failing job."""
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps({"id": job, "args": [PY, "-c", source]}) + "\n")
    junit = tmp_path / "junit.xml"
    result = run_cli("batch", path, "--out", tmp_path / "out", "--junit", junit)
    assert result.returncode == BATCH_FAILED, result.stderr
    said = [line for line in result.stderr.decode().splitlines() if line.startswith("    | ")]
    (case,) = ET.parse(junit).getroot().iter("testcase")
    return said, case


def test_a_coloured_failure_reads_as_its_text_in_the_log_and_the_junit(tmp_path):
    said, case = _failed(tmp_path, "shard", COLOURED)
    assert "    | FAILED tests/x.py::test_y - boom" in said, said
    assert "    | == 1 failed ==" in said, said
    assert case.find("failure").text == "== 1 failed ==\nFAILED tests/x.py::test_y - boom\n"
    assert case.find("system-out").text == case.find("failure").text
    # the capture itself keeps the bytes the job wrote
    assert b"\x1b[31mFAILED" in (tmp_path / "out" / "shard" / "capture" / "stdout.log").read_bytes()


# GCC's coloured diagnostics link a warning's option to its page (``-fdiagnostics-urls``, OSC 8);
# a pager sets a character set and a keypad mode (two-byte escapes); a progress line is redrawn
LINKED = (
    "import sys; sys.stdout.write('\\x1b]8;;https://gcc.gnu.org/x\\x1b\\\\-Wunused\\x1b]8;;\\x1b\\\\ error\\n"
    "\\x1b(B\\x1b=\\x1b7note\\x1b8\\x1b>\\x1b]0;title\\x07 here\\n10%\\r50%\\r100%\\n'); sys.exit(1)"
)


def test_links_two_byte_escapes_and_redraws_read_as_their_text_in_the_log_and_the_junit(tmp_path):
    said, case = _failed(tmp_path, "gcc", LINKED)
    assert said == ["    | -Wunused error", "    | note here", "    | 100%"], said
    assert case.find("failure").text == "-Wunused error\nnote here\n100%\n"


def test_links_and_titles_are_left_out_of_the_pages_tail_as_of_the_log(tmp_path):
    """The page drew an OSC link or title (``ESC ] 8 ;; URL ESC \\``) as its escaped text,
    ``\\x1b]8;;https://...``, around the words the log and the JUnit show alone: it now leaves
    every escape sequence out as they do (``text.as_shown``), keeping only the colours it draws."""
    _failed(tmp_path, "gcc", LINKED)
    page = (tmp_path / "out" / "index.html").read_text()
    (tail,) = re.findall(r'<pre class="tail" data-stream="stdout">(.*?)</pre>', page, re.DOTALL)
    assert tail == "-Wunused error\nnote here\n100%", tail
