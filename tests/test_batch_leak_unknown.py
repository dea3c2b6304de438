"""A job whose container's members could not be read when its command exited (a batch short of
descriptors meets EMFILE there): its summary line had no ``leaked``, which a reader takes as no
leak, its terminal line, the closing count, the page and the JUnit said nothing of it, and the
warnings said ``could not read the container's members`` and ``could not count the container's
members before its teardown`` without the cause. The line now says
``"leaked_unknown": true`` (an added field: a v1 reader still finds no ``leaked``), every report
says the leak is unknown, the warnings name the error, and ``probe`` lists ``batch:leaks-unknown``.

The refusal is injected: the runner's member read (``state.read_members``) raises EMFILE, as a
batch whose open-file limit is reached meets it; the tree is still ended through its group."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from conftest import read_events, run_cli
from streams import require_mechanism

STARVED = ("state", "read_members", "lambda pids: (_ for _ in ()).throw(OSError(24, 'Too many open files'))")
JOBS = [{"id": "leaky", "args": ["sh", "-c", "sleep 300 >/dev/null 2>&1 & exit 0"]}]
UNKNOWN = "(whether it left processes running is unknown: its container's members could not be read)"


def test_a_leak_that_could_not_be_counted_is_said_unknown_not_none(tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in JOBS))
    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    proc = run_cli("batch", manifest, "--out", out, "--junit", junit, patched=STARVED, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr  # a leak fails no job, an unknown one neither
    events = read_events(out / "leaky" / "events.jsonl")
    require_mechanism(events, "cgroup_v2")  # elsewhere the tree's end is not through its group alone
    (began,) = [event for event in events if event["event"] == "cleanup_started"]
    assert began["read_error"] is True
    (line,) = map(json.loads, (out / "summary.jsonl").read_text().splitlines())
    assert "leaked" not in line and line["leaked_unknown"] is True, line
    err = proc.stderr.decode().splitlines()
    assert "processkit-cli: warning: could not read the container's members: Too many open files (os error 24)" in err
    assert (
        "processkit-cli: warning: could not count the container's members before its teardown: "
        "Too many open files (os error 24); cleanup_started's members_before is no count"
    ) in err, err
    assert any(text.startswith(f"batch: leaky: exit 0 {UNKNOWN} in ") for text in err), err
    assert err[-1] == "batch: 1 of 1 job exited 0, 1 with leaks unknown (members unread)", err
    (prop,) = ET.parse(junit).getroot().iter("property")
    assert (prop.get("name"), prop.get("value")) == ("leaked", "unknown")
    assert "whether it left processes running is unknown" in (out / "index.html").read_text()
    # the line read back from the job's stream (a Dask task failed as a whole) says it too
    from processkit.batching.ended import line_from_stream
    from processkit.batching.manifest import jobs_from

    (job,) = jobs_from(JOBS)
    read_back = line_from_stream(job, str(out), events[0]["labels"]["batch"])
    assert read_back is not None and (read_back.leaked, read_back.leaked_unknown) == (None, True)


def test_a_counted_job_has_no_unknown_leak_and_probe_lists_the_field(tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in JOBS))
    proc = run_cli("batch", manifest, "--out", tmp_path / "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (line,) = map(json.loads, (tmp_path / "out" / "summary.jsonl").read_text().splitlines())
    assert line["leaked"] == 1 and "leaked_unknown" not in line, line
    assert "batch:leaks-unknown" in json.loads(run_cli("probe", "--json").stdout)["surface"]


# Every process of the test's run, the API's batch service too (a process of its own whose
# stderr nobody reads): its member read refused as ``STARVED`` refuses the CLI's.
SITE = """
import processkit.engine.state as state
state.read_members = lambda pids: (_ for _ in ()).throw(OSError(24, "Too many open files"))
"""
API_CALL = """
import json, sys, warnings, processkit
with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    lines = processkit.batch(json.loads(sys.argv[1]), out=sys.argv[2])
print(json.dumps([[str(w.message) for w in said], [line.get("leaked_unknown") for line in lines]]))
"""


def test_the_api_caller_is_warned_of_a_leak_that_could_not_be_counted(tmp_path):
    """The run's warnings reach the caller as the service's; the batch's own word, as for a
    leak, names the jobs (the summary's field), once for the batch."""
    import os
    import subprocess
    import sys

    (tmp_path / "sitecustomize.py").write_text(SITE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-c", API_CALL, json.dumps(JOBS), str(tmp_path / "out")],
        cwd=tmp_path, env=env, capture_output=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    said, unknown = json.loads(done.stdout)
    assert "could not read the container's members: Too many open files (os error 24)" in said, said
    assert said[-1] == (
        "1 job could not be checked for processes left running when the child exited "
        "(`leaked_unknown` in the summary): leaky"
    ), said
    assert unknown == [True]


RUN_CALL = """
import json, sys, warnings, processkit
with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    result = processkit.run(json.loads(sys.argv[1]))
print(json.dumps([[(w.category.__name__, str(w.message)) for w in said], result.returncode, result.diagnostics]))
"""


def test_an_api_run_whose_leak_could_not_be_counted_warns_it(tmp_path):
    """The service's reply said a leak only when counted: a run whose members could not be read
    left its caller no word (no ``LeftRunning``, nothing in ``diagnostics``), where the CLI's run
    warns the failed count and batch marks the job ``leaked_unknown``."""
    import os
    import subprocess
    import sys

    (tmp_path / "sitecustomize.py").write_text(SITE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-c", RUN_CALL, json.dumps(JOBS[0]["args"])],
        cwd=tmp_path, env=env, capture_output=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    said, code, diagnostics = json.loads(done.stdout)
    words = (
        "the run could not be checked for processes left running when the child exited "
        "(its container's members could not be read: Too many open files (os error 24))"
    )
    assert code == 0 and said == [["LeftRunning", f"processkit.run('sh', ...): {words}"]], said
    assert f"processkit: warning: {words}\n" in diagnostics, diagnostics
