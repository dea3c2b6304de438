"""A job run with colour forced (``FORCE_COLOR=1``, ``--color=yes``, as CI logs are often made
colourful) writes its failure with escape sequences: the closing block showed each ESC as a
space, ``[31mFAILED [0m tests/x.py:: [1mtest_y [0m``, which a grep for the test's id in the CI
log misses, and the JUnit failure as U+FFFD and the same residue. Both now show the text a
terminal shows (the page already drew the colours): ``FAILED tests/x.py::test_y - boom``."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from conftest import run_cli
from streams import PY

BATCH_FAILED = 117
COLOURED = (
    "import sys; sys.stdout.write('\\x1b[1m== 1 failed ==\\x1b[0m\\n"
    "\\x1b[31mFAILED\\x1b[0m tests/x.py::\\x1b[1mtest_y\\x1b[0m - boom\\x1b[K\\n'); sys.exit(1)"
)


def test_a_coloured_failure_reads_as_its_text_in_the_log_and_the_junit(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps({"id": "shard", "args": [PY, "-c", COLOURED]}) + "\n")
    junit = tmp_path / "junit.xml"
    result = run_cli("batch", path, "--out", tmp_path / "out", "--junit", junit)
    assert result.returncode == BATCH_FAILED, result.stderr
    said = result.stderr.decode().splitlines()
    assert "    | FAILED tests/x.py::test_y - boom" in said, said
    assert "    | == 1 failed ==" in said, said
    (case,) = ET.parse(junit).getroot().iter("testcase")
    assert case.find("failure").text == "== 1 failed ==\nFAILED tests/x.py::test_y - boom\n"
    assert case.find("system-out").text == case.find("failure").text
    # the capture itself keeps the bytes the job wrote
    assert b"\x1b[31mFAILED" in (tmp_path / "out" / "shard" / "capture" / "stdout.log").read_bytes()
