"""``batch`` under the conditions a hostile or tight host gives it: ``--error-format json``
(stderr carries the envelope alone), no ``distributed`` installed for ``--dask-scheduler``,
and a low open-file limit (``ulimit -n``).

Process-level: the real CLI, real children; the import blocker and the limits are set up
for the CLI's process only (PYTHONPATH, a preexec_fn), so nothing on the host changes.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess

import pytest

from conftest import SAFETY_NET, run_cli
from streams import PY, event_time
from test_batch import sleeping_batch, start_batch, write_manifest  # noqa: F401 (start_batch: a fixture)

BATCH_FAILED, CANCELLED, SETUP = 117, 107, 111


def envelope(stderr: bytes) -> dict:
    """stderr as exactly one JSON envelope line, nothing else."""
    text = stderr.decode()
    assert text.endswith("\n") and text.count("\n") == 1, text
    parsed = json.loads(text)
    assert list(parsed) == ["error_version", "code", "kind", "operation", "run_id", "retryable", "message"]
    return parsed


def test_json_mode_a_failing_batch_writes_only_the_envelope(tmp_path):
    jobs = [
        {"args": ["true"], "id": "ok"},
        {"args": ["false"], "id": "bad"},
        {"args": ["/nonexistent/x"], "id": "nospawn"},
    ]
    out = tmp_path / "out"
    manifest = write_manifest(tmp_path / "m.jsonl", jobs)
    proc = run_cli("--error-format", "json", "batch", manifest, "--out", out, "--jobs", "1")  # named in finishing order
    assert proc.returncode == BATCH_FAILED, proc.stderr
    found = envelope(proc.stderr)
    assert (found["code"], found["kind"], found["operation"]) == (BATCH_FAILED, "batch_failed", "batch")
    # stderr holds nothing else, so the one line names whom it counts (before: the counts alone)
    assert found["message"] == (
        f"1 of 3 jobs exited 0, 2 failed; failed bad: exit 1; nospawn: exit 101 (spawn_error); see {out}/summary.jsonl"
    )
    assert len((out / "summary.jsonl").read_text().splitlines()) == 3, "the summary is unchanged"


def test_json_mode_a_batch_that_succeeds_writes_nothing_on_stderr(tmp_path):
    manifest = write_manifest(tmp_path / "m.jsonl", [{"args": ["true"]}, {"args": ["true"]}])
    proc = run_cli("--error-format", "json", "batch", manifest, "--out", tmp_path / "out")
    assert (proc.returncode, proc.stderr) == (0, b"")


def test_json_mode_a_cancelled_batch_writes_only_the_envelope(tmp_path, start_batch):
    batch, _ = sleeping_batch(start_batch, tmp_path, 3, "--error-format=json")
    batch.send_signal(signal.SIGTERM)
    _, err = batch.communicate(timeout=SAFETY_NET)
    assert batch.returncode == CANCELLED, err
    found = envelope(err)
    assert (found["code"], found["kind"], found["operation"]) == (CANCELLED, "cancelled", "batch")
    assert found["message"] == "0 of 3 jobs exited 0, 2 cancelled, 1 not started, cancelled by SIGTERM"


def test_json_mode_keeps_show_output_on_stdout(tmp_path):
    manifest = write_manifest(tmp_path / "m.jsonl", [{"args": ["sh", "-c", "echo hello; exit 4"], "id": "four"}])
    proc = run_cli("--error-format", "json", "batch", manifest, "--out", tmp_path / "out", "--show-output")
    assert proc.returncode == BATCH_FAILED
    assert proc.stdout == b"==> four (exit 4) <==\nhello\n"
    out = tmp_path / "out"
    assert (
        envelope(proc.stderr)["message"]
        == f"0 of 1 job exited 0, 1 failed; failed four: exit 4; see {out}/summary.jsonl"
    )


def test_dask_scheduler_without_distributed_is_a_setup_error_naming_the_extra(tmp_path):
    """``distributed`` made unimportable for the CLI's process only: a package of that name
    first on its path that refuses to load, as a missing one would."""
    blocker = tmp_path / "blocker" / "distributed"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('No module named distributed')\n")
    env = {**os.environ, "PYTHONPATH": str(blocker.parent)}
    out = tmp_path / "out"
    manifest = write_manifest(tmp_path / "m.jsonl", [{"args": ["true"]}])
    proc = run_cli("batch", manifest, "--out", out, "--dask-scheduler", "tcp://127.0.0.1:9", env=env)
    assert proc.returncode == SETUP, proc.stderr
    assert proc.stderr == (
        b"processkit-cli: --dask-scheduler needs Dask's distributed package: pip install 'processkit[dask]'\n"
    )
    assert not out.exists()
    proc = run_cli("--error-format", "json", "batch", manifest, "--dask-scheduler", "tcp://127.0.0.1:9", env=env)
    assert (proc.returncode, envelope(proc.stderr)["kind"]) == (SETUP, "setup")


def _limit(soft: int, hard: int | None = None):
    """A preexec_fn giving the CLI's process this open-file limit (hard: the current one)."""
    current = resource.getrlimit(resource.RLIMIT_NOFILE)[1]

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, current if hard is None else hard))

    return apply


def _max_overlap(out, ids) -> int:
    """The most jobs whose runs overlapped, from each stream's run_started and runner_exit."""
    moments = []
    for job in ids:
        lines = [json.loads(line) for line in (out / job / "events.jsonl").read_text().splitlines()]
        moments.append((event_time(lines[0]), 1))
        moments.append((event_time(lines[-1]), -1))
    peak = now = 0
    for _, step in sorted(moments, key=lambda moment: (moment[0], moment[1])):  # an end before a start at a tie
        now += step
        peak = max(peak, now)
    return peak


def test_a_low_soft_open_file_limit_is_raised_and_jobs_run_at_once(tmp_path):
    """``ulimit -Sn 64`` under a higher hard limit: once raised, 20 jobs fit at once. Each job
    waits (at most 10 s) until 20 jobs have arrived: run one at a time, the first one never
    sees them and fails, which halts the batch."""
    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 4096:
        pytest.skip("the hard open-file limit here leaves no room to raise a soft one of 64")
    arrived = tmp_path / "arrived"
    arrived.mkdir()
    wait = (
        "import os, sys, time\n"
        "d = sys.argv[1]; open(os.path.join(d, sys.argv[2]), 'w').close()\n"
        "deadline = time.monotonic() + 10\n"
        "while len(os.listdir(d)) < 20 and time.monotonic() < deadline: time.sleep(0.01)\n"
        "sys.exit(0 if len(os.listdir(d)) >= 20 else 5)\n"
    )
    ids = [f"j{n}" for n in range(40)]
    jobs = [{"args": [PY, "-c", wait, str(arrived), job], "id": job} for job in ids]
    out = tmp_path / "out"
    manifest = write_manifest(tmp_path / "m.jsonl", jobs)
    proc = run_cli("batch", manifest, "--out", out, "--jobs", "20", "--halt-on-failure", preexec_fn=_limit(64))
    assert proc.returncode == 0, proc.stderr
    assert b"open files" not in proc.stderr, "no warning: the raised limit leaves room"
    assert _max_overlap(out, ids) == 20


@pytest.mark.usefixtures("spawn_backend")
def test_a_jobs_child_gets_the_callers_soft_limit_back(tmp_path):
    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 4096:
        pytest.skip("the hard open-file limit here is too low to tell a raised soft limit apart")
    show = "import resource; print(*resource.getrlimit(resource.RLIMIT_NOFILE))"
    out = tmp_path / "out"
    manifest = write_manifest(tmp_path / "m.jsonl", [{"args": [PY, "-c", show], "id": "limit"}])
    proc = run_cli("batch", manifest, "--out", out, "--show-output", preexec_fn=_limit(200))
    assert proc.returncode == 0, proc.stderr
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    assert proc.stdout == f"==> limit (exit 0) <==\n200 {hard}\n".encode()


@pytest.mark.usefixtures("spawn_backend")
def test_a_hard_limit_lowered_by_a_job_is_said_once_and_later_children_get_it(tmp_path):
    """A job that lowers its batch's hard open-file limit below the caller's soft one (``prlimit
    --pid $PPID``) leaves no later child the caller's limit: each runs with the lower one, said
    in one warning (it was silent), on both spawn paths alike."""
    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 4096 or not shutil.which("prlimit"):
        pytest.skip("needs prlimit and a hard open-file limit above a raised soft one")
    show = "import resource; print(*resource.getrlimit(resource.RLIMIT_NOFILE))"
    jobs = [
        {"args": ["sh", "-c", 'prlimit --pid "$PPID" --nofile=200:200 && ulimit -Sn'], "id": "lowers"},
        {"args": [PY, "-c", show], "id": "next"},
        {"args": [PY, "-c", show], "id": "last"},
    ]
    out = tmp_path / "out"
    manifest = write_manifest(tmp_path / "m.jsonl", jobs)
    proc = run_cli(
        "batch", manifest, "--out", out, "--jobs", "1", "--show-output", preexec_fn=_limit(256), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().splitlines() == [
        "==> lowers (exit 0) <==",
        "256",
        "==> next (exit 0) <==",
        "200 200",
        "==> last (exit 0) <==",
        "200 200",
    ]
    warned = [line for line in proc.stderr.decode().splitlines() if "warning" in line]
    assert warned == [
        "processkit-cli: warning: children now run with an open-file limit (ulimit -n) of 200, below the "
        "caller's 256: this process's hard limit was lowered to 200 since it started"
    ], proc.stderr


def test_a_limit_that_leaves_no_room_for_one_job_fails_once_before_anything_starts(tmp_path):
    out = tmp_path / "out"
    jobs = [{"args": ["true"], "id": f"j{n}"} for n in range(200)]
    # 64: past what any command needs to start (fdlimit.RUN_LEAST), short of a batch's job
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", out, preexec_fn=_limit(64, 64))
    assert proc.returncode == SETUP, proc.stderr
    assert proc.stderr.count(b"\n") == 1, proc.stderr
    assert proc.stderr.startswith(b"processkit-cli: the open-file limit (ulimit -n: 64) leaves no room for a job")
    assert not out.exists(), "nothing made, no job stream"


def test_python_batch_is_not_raised_but_still_fails_clearly(tmp_path):
    """The API leaves its caller's limit alone (the caller's process is not the batch's to
    change); a limit too low for one job is the same clear failure."""
    code = (
        "import resource, sys, processkit\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (40, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))\n"
        "try:\n"
        "    processkit.batch([{'args': ['true']}], out=sys.argv[1])\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, 'ulimit -n: 40' in str(exc))\n"
        "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
    )
    proc = subprocess.run([PY, "-c", code, str(tmp_path / "out")], capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    # a public error naming the limit, never the runner's internal Failure (issue 46)
    assert proc.stdout == b"RuntimeError True\n40\n"


def test_json_mode_names_the_first_five_failed_jobs_and_counts_the_rest(tmp_path):
    jobs = [{"args": ["sh", "-c", f"exit {n}"], "id": f"f{n}"} for n in range(1, 8)]
    out = tmp_path / "out"
    manifest = write_manifest(tmp_path / "m.jsonl", jobs)
    proc = run_cli("--error-format", "json", "batch", manifest, "--out", out, "--jobs", "1")
    assert proc.returncode == BATCH_FAILED, proc.stderr
    named = "; ".join(f"f{n}: exit {n}" for n in range(1, 6))
    expected = f"0 of 7 jobs exited 0, 7 failed; failed {named}; and 2 more; see {out}/summary.jsonl"
    assert envelope(proc.stderr)["message"] == expected
