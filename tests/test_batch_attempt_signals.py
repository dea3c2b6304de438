"""A retried job's earlier attempt that died of a signal, through the real CLI: its line in
``summary.jsonl`` keeps the signal, and the JUnit's ``flakyFailure``/``rerunFailure`` and the
page name it (``killed by signal 11 (SIGSEGV)``, nextest's SIGSEGV), as they do for a last
attempt; ``exit 139`` alone reads as the child's own exit code."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from conftest import run_cli
from streams import PY

BATCH_FAILED = 117
# Dies of SIGSEGV (no core) on its first attempt; on a later one passes when argv[2] is "pass".
SEGV_ONCE = (
    "import os,resource,signal,sys\n"
    "resource.setrlimit(resource.RLIMIT_CORE,(0,0))\n"
    "if os.path.exists(sys.argv[1]) and sys.argv[2]=='pass': sys.exit(0)\n"
    "open(sys.argv[1],'w').close()\n"
    "os.kill(os.getpid(),signal.SIGSEGV)\n"
)
SEGV = "killed by signal 11 (SIGSEGV)"


def test_an_earlier_attempts_signal_is_kept_and_said(tmp_path):
    jobs = [
        {"id": "flaky", "args": [PY, "-c", SEGV_ONCE, str(tmp_path / "a"), "pass"]},
        {"id": "always", "args": [PY, "-c", SEGV_ONCE, str(tmp_path / "b"), "fail"]},
    ]
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    done = run_cli("batch", manifest, "--out", out, "--retries", "1", "--junit", junit)
    assert done.returncode == BATCH_FAILED, done.stderr
    lines = {line["id"]: line for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}
    assert lines["flaky"]["flaky"] is True
    assert [attempt.get("signal") for attempt in lines["flaky"]["earlier_attempts"]] == [11]
    assert [attempt.get("signal") for attempt in lines["always"]["earlier_attempts"]] == [11]
    assert lines["always"]["signal"] == 11
    cases = {case.get("name"): case for case in ET.parse(junit).getroot().iter("testcase")}
    flaky = cases["flaky"].find("flakyFailure")
    assert flaky is not None and flaky.get("message") == f"attempt 1: {SEGV}, exit 139", flaky.attrib
    rerun = cases["always"].find("rerunFailure")
    assert rerun is not None and rerun.get("message") == f"attempt 1: {SEGV}, exit 139", rerun.attrib
    # A Dask task that failed as a whole reads these lines back from the streams: the same signals.
    from processkit.batching.ended import line_from_stream
    from processkit.batching.manifest import jobs_from

    label = json.loads((out / "flaky" / "events.jsonl").read_text().splitlines()[0])["labels"]["batch"]
    for job in jobs_from(jobs):
        read = line_from_stream(job, str(out), label)
        assert read is not None and read.signal == lines[job.id].get("signal"), job.id
        assert [attempt.signal for attempt in read.earlier_attempts] == [11], job.id
    page = (out / "index.html").read_text()
    probe = json.loads(run_cli("probe", "--json").stdout)
    assert "batch:attempt-signals" in probe["surface"]
    assert f"flaky (attempt 1): {SEGV}, exit 139" in page and f"always (attempt 1): {SEGV}, exit 139" in page


def test_a_line_without_a_signal_has_no_signal_key(tmp_path):
    """Only the attempts a signal ended carry ``signal``: an older reader meets nothing new."""
    flaky = "import os,sys\nif os.path.exists(sys.argv[1]): sys.exit(0)\nopen(sys.argv[1],'w').close()\nsys.exit(2)"
    out = tmp_path / "out"
    done = run_cli("batch", "--out", out, "--retries", "1", "--", PY, "-c", flaky, str(tmp_path / "m"), ":::", "x")
    assert done.returncode == 0, done.stderr
    (line,) = map(json.loads, (out / "summary.jsonl").read_text().splitlines())
    assert list(line["earlier_attempts"][0]) == [
        "attempt", "dir", "run_id", "started_at", "exit_code", "source", "duration_ms", "message",
    ]  # fmt: skip
