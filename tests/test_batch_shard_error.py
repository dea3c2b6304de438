"""A failing shard's error, shown where a CI reader looks: a real pytest shard whose failing test
printed 2 MB had its assertion (``E   assert ...``) ~500 bytes into the capture, beyond the 5
last lines of the closing block and the JUnit's last 4 KiB, so neither showed why it failed
(nextest's JUnit keeps a failed test's whole output, and shows the panic message it finds in
it). Now the block shows the lines that say why, then the last ones, every stretch between
counted; the JUnit's ``failure`` holds the same, and its ``system-out`` the whole capture up
to 1 MiB, past that its first and last 512 KiB with the bytes between said. Process-level: the
real CLI, a real pytest, the JUnit parsed."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from conftest import run_cli
from streams import PY
from test_batch import write_manifest
from test_batch_failures import failure_block

BATCH_FAILED = 117
SHARD = """
def test_passes():
    assert True


def test_logs_then_fails():
    for n in range(40000):
        print(f"log line {n:06d} " + "x" * 40)
    assert "expected-value" == "actual-value"
"""


def _batch(tmp_path, jobs: list[dict], **run) -> tuple[list[str], dict]:
    """The closing block and the JUnit's test cases, by name, of a batch of failing ``jobs``."""
    junit = tmp_path / "junit.xml"
    manifest = write_manifest(tmp_path / "m.jsonl", jobs)
    proc = run_cli("batch", manifest, "--out", tmp_path / "out", "--junit", junit, cwd=tmp_path, **run)
    assert proc.returncode == BATCH_FAILED, proc.stderr
    cases = {case.get("name"): case for case in ET.parse(junit).getroot().iter("testcase")}
    return failure_block(proc.stderr), cases


def test_a_pytest_shards_assertion_in_a_large_capture_is_shown_on_the_terminal_and_in_the_junit(tmp_path):
    (tmp_path / "test_shard.py").write_text(SHARD)
    job = {
        "id": "shard",
        "args": [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark", "test_shard.py"],
    }
    block, cases = _batch(tmp_path, [{**job, "cwd": str(tmp_path)}])
    capture = tmp_path / "out" / "shard" / "capture" / "stdout.log"
    data = capture.read_bytes()
    assertion = "'expected-value' == 'actual-value'"
    at = data.index(assertion.encode())
    assert at < 2000 and len(data) > 2_000_000, (at, len(data))  # the case: the error near the head of 2 MB

    said = next(line for line in block if line.startswith("    stdout: "))
    assert re.search(r"\(its \d+ line\(s\) that say why and its last 5 line\(s\) of 2\.\d MiB shown\)$", said), said
    shown = [line for line in block if line.startswith("    | ")]
    assert any(line.startswith("    | E ") and assertion in line for line in shown), block
    assert any(line.startswith("    | FAILED test_shard.py::test_logs_then_fails") for line in shown), block
    assert shown[-1].startswith("    | 1 failed, 1 passed"), block
    gaps = [line for line in block if line.startswith("    ... ")]
    assert gaps and all(re.fullmatch(r"    \.\.\. [0-9]+ lines? not shown", line) for line in gaps), block
    assert any(int(line.split()[1]) > 39000 for line in gaps), "the log's lines are counted, not dropped unsaid"
    assert len(block) < 40, "the block is the lines that say why and the last ones, not the capture"

    case = cases["shard"]
    failure = case.find("failure").text
    first = (
        rf"\[its \d+ line\(s\) that say why and its last \d+ line\(s\) of the 2\.\d MiB in {re.escape(str(capture))}\]"
    )
    assert re.fullmatch(first, failure.splitlines()[0]), failure
    assert any(line.startswith("E ") and assertion in line for line in failure.splitlines()), failure
    assert "FAILED test_shard.py::test_logs_then_fails" in failure
    assert re.search(r"^\[[0-9]+ lines not shown\]$", failure, re.M), failure
    assert len(failure) < 16 << 10

    out = case.find("system-out").text
    assert out.startswith(f"[the first 512 KiB and the last 512 KiB of the 2.2 MiB in {capture}]\n"), out[:200]
    assert assertion in out and "FAILED test_shard.py::test_logs_then_fails" in out
    left = re.search(r"^\[\.\.\. ([0-9.]+) MiB left out here, after byte ([0-9]+): the whole is in (.+)\]$", out, re.M)
    assert left and left.group(3) == str(capture), out[:200]
    assert data[: int(left.group(2))].decode() in out, "the head kept is the file's, to the byte said"
    assert len(out.encode()) < (1 << 20) + 1024, "the kept output is bounded by its 1 MiB"
    assert (tmp_path / "junit.xml").stat().st_size < (1 << 20) + (64 << 10)


def test_a_failed_jobs_output_under_the_cap_is_in_the_junit_whole(tmp_path):
    """A failed job's 81 KiB of output, all of it: its tail alone was 4 KiB."""
    job = "for i in $(seq 1 4000); do echo line $i of the log; done; echo done; exit 3"
    block, cases = _batch(tmp_path, [{"id": "noisy", "args": ["sh", "-c", job]}])
    whole = (tmp_path / "out" / "noisy" / "capture" / "stdout.log").read_text()
    assert len(whole) > 80_000
    assert cases["noisy"].find("system-out").text == whole


def test_a_failure_no_line_of_which_says_why_shows_its_first_and_last_lines(tmp_path):
    """No line says why: the first five lines (a command's banner, a compiler's first words),
    the count of those between, the last five; the JUnit's failure the same, its first line
    saying what it is."""
    job = "echo starting the tool; for i in $(seq 1 300); do echo step $i; done; echo gave up; exit 2"
    block, cases = _batch(tmp_path, [{"id": "tool", "args": ["sh", "-c", job]}])
    start = block.index("  tool: exit 2")
    assert block[start + 1].endswith("(its first 5 and last 5 line(s) of 2.6 KiB shown)"), block
    assert block[start + 2 : start + 7] == ["    | starting the tool", *(f"    | step {n}" for n in range(1, 5))]
    assert block[start + 7] == "    ... 292 lines not shown"
    assert block[start + 8 : start + 13] == [*(f"    | step {n}" for n in range(297, 301)), "    | gave up"]
    failure = cases["tool"].find("failure").text  # the whole capture is in its last 4 KiB: all of it
    assert failure.splitlines()[0] == "starting the tool" and failure.endswith("gave up\n"), failure


def test_more_lines_that_say_why_than_shown_are_counted(tmp_path):
    """Thirty ``ERROR`` lines in a large capture: the first ten shown, and the path's line says
    how many there were (the file holds them all)."""
    job = (
        "import sys\n"
        "for n in range(30): print(f'ERROR case {n} broke'); print('filler ' * 30)\n"
        "for n in range(2000): print('more filler ' * 5)\n"
        "print('30 errors'); sys.exit(1)\n"
    )
    block, cases = _batch(tmp_path, [{"id": "many", "args": [PY, "-c", job]}])
    said = next(line for line in block if line.startswith("    stdout: "))
    assert "(its first 10 of 30 lines that say why and its last 5 line(s) of " in said, said
    shown = [line for line in block if line.startswith("    | ERROR ")]
    assert shown == [f"    | ERROR case {n} broke" for n in range(10)], block
    failure = cases["many"].find("failure").text
    assert failure.startswith("[its 30 line(s) that say why and its last "), failure
    assert all(f"ERROR case {n} broke\n" in failure for n in range(30))


def test_a_capture_past_what_is_searched_says_the_rest_was_not_counted(tmp_path):
    """A capture larger than the 64 MiB searched of each (its cap raised): the lines that say
    why in its first 64 MiB, then a line saying the rest was neither counted nor shown, then its
    last lines; the search reads it a piece at a time."""
    job = "echo 'E   early error'; yes 'filler line of a big log' | head -c 70000000; echo 'the last line'; exit 1"
    jobs = [{"id": "huge", "args": ["sh", "-c", job], "capture_max_bytes": "80m"}]
    block, cases = _batch(tmp_path, jobs)
    start = block.index("  huge: exit 1")
    assert block[start + 1].endswith("(its 1 line(s) that say why and its last 5 line(s) of 66.8 MiB shown)"), block
    assert block[start + 2 : start + 4] == [
        "    | E   early error",
        "    ... the rest, past its first 64 MiB searched (not counted), not shown",
    ]
    assert block[start + 8] == "    | the last line", block
    failure = cases["huge"].find("failure").text
    assert "E   early error\n[the rest, past its first 64 MiB searched (not counted), not shown]\n" in failure


def test_a_coloured_pytest_shard_says_why_as_a_plain_one_does(tmp_path):
    """``pytest --color=yes`` (a CI's forced colour): its test header and short summary end or
    begin with colour sequences, and are found all the same, shown as plain text."""
    (tmp_path / "test_shard.py").write_text(SHARD)
    args = [PY, "-m", "pytest", "-q", "--color=yes", "-p", "no:cacheprovider", "-p", "no:benchmark", "test_shard.py"]
    block, _ = _batch(tmp_path, [{"id": "shard", "args": args, "cwd": str(tmp_path)}])
    shown = [line for line in block if line.startswith("    | ")]
    assert any(re.fullmatch(r"    \| _+ test_logs_then_fails _+", line) for line in shown), block
    assert any(line.startswith("    | E ") for line in shown), block
    assert not any("\x1b" in line for line in block), block


COLOURED = r"""
import sys
out = sys.stdout.buffer
out.write(b"\x1b[0m" * (1 << 18) + b"\n")  # one 1 MiB line of terminal sequences
out.write(b"\x1b[1m\x1b[31mtest_x.py\x1b[0m:7: AssertionError\n")  # pytest --color=yes
for n in range(300):
    out.write(b"log line %d\n" % n)
sys.exit(1)
"""


def test_a_mebibyte_line_of_colour_sequences_is_searched_in_linear_time(tmp_path):
    """A 1 MiB line of ``ESC[0m`` (262144 of them): each a start of the location pattern re-scanning the
    rest of the line stalled the closing block and the JUnit for many minutes; pytest's coloured
    location line still says why. The timeout is a hang guard, not a timing."""
    block, cases = _batch(tmp_path, [{"id": "coloured", "args": [PY, "-c", COLOURED]}], timeout=60)
    assert any(line.startswith("    | ") and "test_x.py:7: AssertionError" in line for line in block), block
    assert "test_x.py:7: AssertionError" in cases["coloured"].find("failure").text


def test_the_junits_budget_for_output_counts_its_bytes_as_written_escaped(tmp_path):
    """The tails' budget counted characters before XML escaping: a failed job's ``<`` is the 4
    bytes ``&lt;`` in the file, so failing jobs printing them wrote about 4 times the budget
    (200 such jobs: a 156 MB JUnit against a 64 MiB budget). The budget made 256 KiB here; the
    file stays within it and the framing."""
    budget = 256 << 10
    job = f"{PY} -c \"import sys; [print('E   ' + '<' * 100) for _ in range(3000)]; sys.exit(1)\""
    jobs = [{"id": f"lt{n}", "args": ["sh", "-c", job]} for n in range(8)]
    junit = tmp_path / "junit.xml"
    manifest = write_manifest(tmp_path / "m.jsonl", jobs)
    patched = ("processkit.report.junit", "TAILS_BYTES", str(budget))
    proc = run_cli("batch", manifest, "--out", tmp_path / "out", "--junit", junit, cwd=tmp_path, patched=patched)
    assert proc.returncode == BATCH_FAILED, proc.stderr
    assert b"&lt;" * 100 in junit.read_bytes()
    assert junit.stat().st_size < budget + (128 << 10), junit.stat().st_size


def test_the_note_of_what_is_left_out_of_one_long_line_is_on_a_line_of_its_own(tmp_path):
    """A failed job's 3 MiB on one line, no line feed: the note of the bytes left out between
    its first and last 512 KiB ran on from the kept head's last character."""
    job = f"{PY} -c \"import sys; sys.stdout.write('x' * (3 << 20)); sys.exit(1)\""
    block, cases = _batch(tmp_path, [{"id": "long", "args": ["sh", "-c", job]}])
    out = cases["long"].find("system-out").text
    assert re.search(r"^x+\n\[\.\.\. [0-9.]+ MiB left out here, after byte 524288: ", out, re.M), out[-300:]


def test_a_long_line_that_says_why_is_shown_by_its_first_197_characters(tmp_path):
    """As docs/batch.md says: a line that says why over 200 characters is its first 197, then
    ``...``, 200 in all, as a last line is its last 197 after ``...`` (it was 200 and ``...``)."""
    why = "E   " + "y" * 300
    job = f"echo '{why}'; for i in $(seq 1 300); do echo log line $i of the run; done; exit 1"
    block, _ = _batch(tmp_path, [{"id": "wide", "args": ["sh", "-c", job]}])
    assert f"    | {why[:197]}..." in block, block
