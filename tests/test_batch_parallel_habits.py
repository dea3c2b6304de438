"""The GNU parallel habits ``batch`` claims, run beside the real ``parallel`` on the same input.

A habit claimed is checked against parallel itself where it is installed (skipped, with the
reason, where it is not): the same jobs at once for ``-j``'s relative forms, the same argv for
the replacement strings. Concurrency is observed by a barrier the jobs meet, never by timing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from conftest import run_cli
from streams import PY

USAGE = 100
CPUS = len(os.sched_getaffinity(0)) or 1
# A job that marks its arrival in $BARRIER and exits 0 once WANT jobs have arrived; 1 if they do
# not within a minute (the jobs were not run that many at once).
BARRIER = (
    "import os,sys,time\n"
    "d,want=os.environ['BARRIER'],int(sys.argv[1])\n"
    "open(os.path.join(d,sys.argv[2]),'w').close()\n"
    "end=time.monotonic()+60\n"
    "while len(os.listdir(d))<want:\n"
    "    if time.monotonic()>end: sys.exit(1)\n"
    "    time.sleep(0.01)\n"
)
needs_parallel = pytest.mark.skipif(shutil.which("parallel") is None, reason="GNU parallel is not installed")


def _barrier_batch(tmp_path, jobs: str, want: int) -> subprocess.CompletedProcess:
    barrier = tmp_path / f"barrier-batch{jobs}"
    barrier.mkdir()
    names = [str(n) for n in range(want)]
    return run_cli(
        "batch", "-j", jobs, "--out", tmp_path / f"out{jobs}", "--env", f"BARRIER={barrier}",
        "--", PY, "-c", BARRIER, str(want), "{}", ":::", *names, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize(("jobs", "want"), [("+1", CPUS + 1), ("0", 6), ("200%", 2 * CPUS)])
def test_relative_jobs_run_as_many_at_once_as_parallel_does(tmp_path, jobs, want):
    """``-j +1`` is the CPUs plus one, ``-j 200%`` twice the CPUs and ``-j 0`` as many as can run,
    as GNU parallel reads them (``+1`` was taken for 1, and ``0`` refused): ``want`` jobs that
    each wait for all ``want`` to have started all pass."""
    done = _barrier_batch(tmp_path, jobs, want)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]


@needs_parallel
def test_relative_jobs_match_gnu_parallel(tmp_path):
    """The same barrier passes under GNU parallel with the same ``-j +1``: the peer's meaning."""
    barrier = tmp_path / "barrier-parallel"
    barrier.mkdir()
    want = CPUS + 1
    names = [str(n) for n in range(want)]
    done = subprocess.run(
        ["parallel", "--will-cite", "-j", "+1", "-q", PY, "-c", BARRIER, str(want), "{}", ":::", *names],
        env={**os.environ, "BARRIER": str(barrier)},
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert _barrier_batch(tmp_path, "+1", want).returncode == 0


@pytest.mark.parametrize("jobs", [f"-{CPUS}", "0%", "5000", "x", "+5000"])
def test_jobs_that_leave_none_to_run_are_refused(tmp_path, jobs):
    """``-j -N`` that leaves no CPU (parallel: "Cannot run any jobs"), ``0%``, or a number past
    4096 is a usage error that names the flag, before anything is made."""
    refused = run_cli("batch", "-j", jobs, "--out", tmp_path / "out", "--", "true", ":::", "a")
    assert refused.returncode == USAGE and b"--jobs" in refused.stderr, refused.stderr
    assert not (tmp_path / "out").exists()


def _outcomes(out) -> list[tuple[str, object, str]]:
    lines = (out / "summary.jsonl").read_text().splitlines()
    return [(line["id"], line["exit_code"], line["source"]) for line in map(json.loads, lines)]


def test_halt_records_a_templates_unstarted_jobs_as_its_manifest_does(tmp_path):
    """``--halt-on-failure`` (parallel's ``--halt soon,fail=1``) with ``::: ...`` arguments: the
    jobs it left unstarted have their ``halted`` lines and are counted, exactly as when the same
    jobs come from the manifest ``--dry-run`` prints (they were dropped unrecorded, the closing
    line counting 2 jobs of 4)."""
    words = ["--", "sh", "-c", 'exit "$1"', "sh", ":::", "0", "3", "0", "5"]
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_bytes(run_cli("batch", "--dry-run", *words).stdout)
    from_template = run_cli("batch", "-j", "1", "--halt-on-failure", "--out", tmp_path / "t", *words)
    from_manifest = run_cli("batch", manifest, "-j", "1", "--halt-on-failure", "--out", tmp_path / "m")
    assert from_template.returncode == from_manifest.returncode == 117
    expected = [("0", 0, "child_exit"), ("3", 3, "child_exit"), ("0-3", None, "halted"), ("5", None, "halted")]
    assert _outcomes(tmp_path / "t") == _outcomes(tmp_path / "m") == expected
    closing = b"batch: 1 of 4 jobs exited 0, 1 failed, 2 not started"
    assert from_template.stderr.splitlines()[-1] == from_manifest.stderr.splitlines()[-1] == closing


AWKWARD = ["a b.tar.gz", "dir.d/file", "-n", "--help", ".hidden", "d/", "a//b//", "/", "ünï cödé.é", "x.", "", "$(x) *"]
STRINGS = ["{}", "{.}", "{/}", "{//}", "{/.}", "{#}", "x{}y", "{1}", "{1.}", "{1/}", "{1//}", "{1/.}"]


@needs_parallel
@pytest.mark.parametrize(
    "sources", [[":::", *AWKWARD], [":::", "a", "b", ":::", "x y", "z"], [":::", "p", ":::+", "q"]]
)
def test_replacement_strings_give_parallels_argv(sources):
    """Every replacement string, on names with spaces, dots, slashes, leading dashes, non-ASCII
    text and the empty name, and across several sources: the argv ``--dry-run`` shows is the one
    ``parallel -q`` gives its command, element for element and job for job."""
    strings = STRINGS if len(sources) == len(AWKWARD) + 1 else ["{}", "{1}", "{2}", "{#}", "{2/.}"]
    peer = subprocess.run(
        ["parallel", "--will-cite", "-k", "-q", "printf", "%s\\0", *strings, *sources], capture_output=True, timeout=60
    )
    ours = run_cli("batch", "--dry-run", "--", "printf", "%s\\0", *strings, *sources)
    assert peer.returncode == ours.returncode == 0, (peer.stderr, ours.stderr)
    argv = [arg for line in ours.stdout.splitlines() for arg in json.loads(line)["args"][2:]]
    assert peer.stdout.split(b"\0")[:-1] == [arg.encode() for arg in argv]


def test_the_api_takes_jobs_0_as_the_cli_does(tmp_path):
    """``processkit.batch(jobs=0)`` runs its jobs, as many at once as fit (``-j 0``); it recorded
    every one ``halted`` without running any."""
    import processkit

    lines = processkit.batch([{"args": ["true"]}, {"args": ["true"]}], jobs=0, out=str(tmp_path / "out"))
    assert [(line["exit_code"], line["source"]) for line in lines] == [(0, "child_exit")] * 2
