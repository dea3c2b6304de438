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
AFFINITY = sorted(os.sched_getaffinity(0))
CPUS = len(AFFINITY) or 1
JOBS = 8  # jobs per form: the highest slot seen is the jobs at once, up to this many
# A job that writes its slot ($3) in a file named by its number ($2), then exits 0 once WANT
# ($1) jobs have arrived; 1 if they do not within a minute (the jobs were not run that many at
# once). WANT jobs running side by side hold WANT slots, and slots go from 1 to the jobs at once:
# the highest slot is WANT exactly when WANT is the most run at once.
BARRIER = (
    "import os,sys,time\n"
    "d,want=os.environ['BARRIER'],int(sys.argv[1])\n"
    "with open(os.path.join(d,sys.argv[2]),'w') as f: f.write(sys.argv[3])\n"
    "end=time.monotonic()+60\n"
    "while len(os.listdir(d))<want:\n"
    "    if time.monotonic()>end: sys.exit(1)\n"
    "    time.sleep(0.01)\n"
)
needs_parallel = pytest.mark.skipif(shutil.which("parallel") is None, reason="GNU parallel is not installed")


def _on_one_cpu() -> None:
    os.sched_setaffinity(0, {AFFINITY[0]})


def _highest_slot(barrier) -> int:
    return max(int((barrier / name).read_text()) for name in os.listdir(barrier))


def _barrier_batch(tmp_path, jobs: str, want: int, **kwargs) -> tuple[subprocess.CompletedProcess, int]:
    """Run JOBS barrier jobs under ``batch -j JOBS``: how it ended, and the highest ``{%}``."""
    barrier = tmp_path / "barrier-batch"
    barrier.mkdir()
    names = [str(n) for n in range(JOBS)]
    done = run_cli(
        "batch", "-j", jobs, "--out", tmp_path / "out", "--env", f"BARRIER={barrier}",
        "--", PY, "-c", BARRIER, str(want), "{#}", "{%}", ":::", *names, timeout=120, **kwargs,
    )  # fmt: skip
    return done, _highest_slot(barrier) if done.returncode == 0 else 0


def _barrier_parallel(tmp_path, jobs: str, want: int, **kwargs) -> tuple[subprocess.CompletedProcess, int]:
    """The same jobs under the real ``parallel -j JOBS``."""
    barrier = tmp_path / "barrier-parallel"
    barrier.mkdir()
    names = [str(n) for n in range(JOBS)]
    done = subprocess.run(
        ["parallel", "--will-cite", "-j", jobs, "-q", PY, "-c", BARRIER, str(want), "{#}", "{%}", ":::", *names],
        env={**os.environ, "BARRIER": str(barrier)},
        capture_output=True,
        timeout=120,
        **kwargs,
    )
    return done, _highest_slot(barrier) if done.returncode == 0 else 0


# -j's forms and the jobs at once parallel gives for them on this machine's CPUs (P% rounded up)
FORMS = [
    ("+1", CPUS + 1),
    ("+00001", CPUS + 1),
    ("0", JOBS),
    ("4", 4),
    ("200%", 2 * CPUS),
    ("75%", -(-3 * CPUS // 4)),
    ("10000%", 100 * CPUS),
    ("1000.0000001%", 10 * CPUS + 1),
] + ([("-00001", CPUS - 1)] if CPUS > 1 else [])


@pytest.mark.parametrize(("jobs", "at_once"), FORMS)
def test_relative_jobs_run_as_many_at_once_as_parallel_does(tmp_path, jobs, at_once):
    """``-j +1`` is the CPUs plus one, ``-j 200%`` twice the CPUs (rounded up), ``-j 0`` as many
    as can run, leading zeros and long fractions as parallel reads them (``+1`` was taken for 1,
    ``0`` refused, ``+00001`` run 1 at a time and ``10000%`` refused): the jobs reach the number
    at once, and no more (their highest slot ``{%}`` is that number)."""
    want = min(at_once, JOBS)
    done, highest = _barrier_batch(tmp_path, jobs, want)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    assert highest == want


@needs_parallel
@pytest.mark.parametrize(("jobs", "at_once"), FORMS)
def test_relative_jobs_match_gnu_parallel(tmp_path, jobs, at_once):
    """The same jobs under GNU parallel with the same ``-j``: the same highest slot."""
    want = min(at_once, JOBS)
    peer, peer_highest = _barrier_parallel(tmp_path, jobs, want)
    assert peer.returncode == 0, peer.stderr
    done, highest = _barrier_batch(tmp_path, jobs, want)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    assert highest == peer_highest == want


def test_half_the_cpus_of_one_is_one_job_at_a_time(tmp_path):
    """On one CPU ``-j 50%`` rounds up to 1 job at a time (rounded down it would run none), and
    ``-j -1`` leaves none: refused, as parallel refuses it ("Cannot run any jobs")."""
    done, highest = _barrier_batch(tmp_path, "50%", 1, preexec_fn=_on_one_cpu)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    assert highest == 1
    refused = run_cli("batch", "-j", "-1", "--out", tmp_path / "o", "--", "true", ":::", "a", preexec_fn=_on_one_cpu)
    assert refused.returncode == USAGE, refused.stderr
    assert b"it gives 0 jobs at once on 1 CPU(s)" in refused.stderr, refused.stderr


@needs_parallel
def test_half_the_cpus_of_one_matches_gnu_parallel(tmp_path):
    """parallel on one CPU: ``-j 50%`` runs 1 at a time, ``-j -1`` runs nothing."""
    peer, highest = _barrier_parallel(tmp_path, "50%", 1, preexec_fn=_on_one_cpu)
    assert peer.returncode == 0 and highest == 1, peer.stderr
    refused = subprocess.run(
        ["parallel", "--will-cite", "-j", "-1", "true", ":::", "a"], capture_output=True, preexec_fn=_on_one_cpu
    )
    assert refused.returncode != 0 and b"Cannot run any jobs" in refused.stderr, refused.stderr


GIVES = "it gives {} jobs at once on {} CPU(s); expected from 1 to 4096"
RELATIVE = "expected +N or -N (the CPUs plus or minus N) or P% of the CPUs"
WHOLE = "expected a whole number from 0 to 4096"


@pytest.mark.parametrize(
    ("jobs", "said"),
    [
        (f"-{CPUS}", GIVES.format(0, CPUS)),
        ("0%", GIVES.format(0, CPUS)),
        ("+5000", GIVES.format(CPUS + 5000, CPUS)),
        ("+" + "0" * 5000 + "5000", GIVES.format(CPUS + 5000, CPUS)),
        ("99999999%", GIVES.format(-(-99999999 * CPUS // 100), CPUS)),
        ("5000", WHOLE),
        ("x", WHOLE),
        ("9" * 5000, WHOLE),
        ("+1234567890", RELATIVE),
        ("1.1234567891%", RELATIVE),
        ("9" * 400 + "%", RELATIVE),
        ("1e3%", RELATIVE),
        ("-", RELATIVE),
    ],
)
def test_jobs_that_leave_none_to_run_are_refused(tmp_path, jobs, said):
    """``-j -N`` that leaves no CPU (parallel: "Cannot run any jobs"), ``0%``, or a number past
    4096 is a usage error that names the flag and what the form gives, before anything is made;
    text that looks relative but is not one of the forms is told the forms (it was told "a
    whole number"), and a long one is refused in words, not a traceback."""
    refused = run_cli("batch", "-j", jobs, "--out", tmp_path / "out", "--", "true", ":::", "a")
    assert refused.returncode == USAGE, refused.stderr
    assert b"for '--jobs <N>': " in refused.stderr and said.encode() in refused.stderr, refused.stderr
    assert not (tmp_path / "out").exists()


def _outcomes(out) -> list[tuple[str, object, str]]:
    lines = (out / "summary.jsonl").read_text().splitlines()
    return [(line["id"], line["exit_code"], line["source"]) for line in map(json.loads, lines)]


def test_halt_records_a_templates_unstarted_jobs_as_its_manifest_does(tmp_path):
    """``--halt-on-failure`` (parallel's ``--halt soon,fail=1``) with ``::: ...`` arguments gives
    the same lines and closing count as the manifest ``--dry-run`` prints for them: what
    test_batch_failures.py's halted-template test does not compare (a repeated value's id too)."""
    words = ["--", "sh", "-c", 'exit "$1"', "sh", ":::", "0", "3", "0", "5"]
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_bytes(run_cli("batch", "--dry-run", *words).stdout)
    from_template = run_cli("batch", "-j", "1", "--halt-on-failure", "--out", tmp_path / "t", *words)
    from_manifest = run_cli("batch", manifest, "-j", "1", "--halt-on-failure", "--out", tmp_path / "m")
    assert from_template.returncode == from_manifest.returncode == 117
    expected = [("0", 0, "child_exit"), ("3", 3, "child_exit"), ("0-3", None, "halted"), ("5", None, "halted")]
    assert _outcomes(tmp_path / "t") == _outcomes(tmp_path / "m") == expected
    closing = b"batch: 1 of 4 jobs exited 0, 1 failed, 2 not started, halted by --halt-on-failure"
    assert from_template.stderr.splitlines()[-1] == from_manifest.stderr.splitlines()[-1] == closing


AWKWARD = ["a b.tar.gz", "dir.d/file", "-n", "--help", ".hidden", "d/", "a//b//", "/", "ünï cödé.é", "x.", "", "$(x) *"]
STRINGS = ["{}", "{.}", "{/}", "{//}", "{/.}", "{#}", "x{}y", "{1}", "{1.}", "{1/}", "{1//}", "{1/.}", "{-1}", "{-1/.}"]


@needs_parallel
@pytest.mark.parametrize(
    "sources", [[":::", *AWKWARD], [":::", "a", "b", ":::", "x y", "z"], [":::", "p", ":::+", "q"]]
)
def test_replacement_strings_give_parallels_argv(sources):
    """Every replacement string, on names with spaces, dots, slashes, leading dashes, non-ASCII
    text and the empty name, and across several sources: the argv ``--dry-run`` shows is the one
    ``parallel -q`` gives its command, element for element and job for job."""
    strings = STRINGS if len(sources) == len(AWKWARD) + 1 else ["{}", "{1}", "{2}", "{#}", "{2/.}", "{-1}", "x{-2.}y"]
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
