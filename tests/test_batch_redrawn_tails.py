"""A failed job's tail as the closing block, the JUnit report and the page show it: a NUL was a
space in the block and U+FFFD in the JUnit; and a line redrawn by carriage returns showed only
its last piece, so ``ERROR boom\\r50%\\rdone`` read ``done`` in all three, hiding the error a
terminal still shows (as ``doneR boom``). The three now agree: a NUL is a space, and each piece
that holds text and that no later piece covers whole is shown on a line of its own, while a
progress line that grows stays its last piece."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from conftest import run_cli
from streams import PY

BATCH_FAILED = 117
SOURCE = "import sys; sys.stderr.write('a\\x00b\\nERROR boom\\r50%\\rdone\\n10%\\r50%\\r100%\\n'); sys.exit(1)"


def test_a_nul_and_a_redrawn_error_read_alike_in_the_block_the_junit_and_the_page(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps({"id": "w", "args": [PY, "-c", SOURCE]}) + "\n")
    junit = tmp_path / "junit.xml"
    result = run_cli("batch", path, "--out", tmp_path / "out", "--junit", junit, cwd=tmp_path)
    assert result.returncode == BATCH_FAILED, result.stderr
    said = [line[6:] for line in result.stderr.decode().splitlines() if line.startswith("    | ")]
    assert said == ["a b", "ERROR boom", "done", "100%"], said
    (case,) = ET.parse(junit).getroot().iter("testcase")
    assert case.find("system-err").text == "a b\nERROR boom\ndone\n100%\n"
    page = (tmp_path / "out" / "index.html").read_text()
    (tail,) = re.findall(r'<pre class="tail" data-stream="stderr">(.*?)</pre>', page, re.DOTALL)
    assert tail == "a\\x00b\nERROR boom\ndone\n100%", tail
