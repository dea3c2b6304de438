"""``bench``'s samples without the engine's run path (``benchmark/direct.py``) against the
engine's (``PROCESSKIT_BENCH_PATH=engine``, the test suite's switch): each case a user meets
gives the same result both ways, and the result expected (so a direct path that got it wrong
fails here, not only where it differs from the engine)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import SAFETY_NET, listed_when, pid_alive, run_cli, start_cli, wait_for_file

PATHS = ("direct", "engine")


def bench(path: str, *args, **kwargs):
    env = dict(os.environ, PROCESSKIT_BENCH_PATH=path)
    return run_cli("bench", "-N", "--style", "none", *args, env=env, **kwargs)


def both(*args, **kwargs):
    """The same benchmark on each path: (returncode, stderr) of each, by path."""
    return {path: bench(path, *args, **kwargs) for path in PATHS}


def exported(tmp_path, path: str, *args) -> dict:
    out = tmp_path / f"{path}.json"
    done = bench(path, "--export-json", out, *args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())["results"][0]


def test_the_common_case_takes_the_direct_path(monkeypatch):
    """A command's run with its output discarded is carried without the engine's run path; a
    step's run (the shell's calibration, a setup) and the switch's runs are the engine's."""
    from processkit.benchmark import direct, driver
    from processkit.benchmark.plan import Options

    taken = []
    real = direct.sample
    monkeypatch.setattr(direct, "sample", lambda *a: taken.append(a[1].argv) or real(*a))
    engine = driver.Engine(Options(), ends_descendants=False)
    try:
        assert engine.measure(("true",), iteration="0", output="null").exit_code == 0
        assert engine.measure(("true",), iteration="1", output="pipe").exit_code == 0
        assert engine.measure(("true",)).exit_code == 0  # a step: the engine's
        monkeypatch.setenv(direct.SWITCH, "engine")
        assert engine.measure(("true",), iteration="2", output="null").exit_code == 0
    finally:
        engine.close()
    assert taken == [("true",), ("true",)]


@pytest.mark.parametrize(
    "command, codes",
    [('sh -c "exit 3"', [3, 3]), ('sh -c "kill -TERM $$"', [143, 143]), ("true", [0, 0])],
)
@pytest.mark.parametrize("spawn_backend", ["native", "python"], indirect=True)
def test_exit_codes_and_the_figures_are_the_same_both_ways(tmp_path, command, codes, spawn_backend):
    results = {path: exported(tmp_path, path, "--runs", "2", "-i", command) for path in PATHS}
    for result in results.values():
        assert result["exit_codes"] == codes
        assert len(result["times"]) == 2 and all(time > 0 for time in result["times"])
        for field in ("user_times", "system_times", "memory_usage_byte", "tree_peak_memory_byte"):
            assert len(result[field]) == 2 and all(value is not None for value in result[field]), field
    assert sorted(results["direct"]) == sorted(results["engine"])


def test_a_failing_command_without_ignore_failure_is_said_the_same_both_ways():
    done = both("--runs", "2", 'sh -c "exit 3"')
    for result in done.values():
        assert result.returncode == 118
        assert b"exited with 3 in its first timed run; use --ignore-failure" in result.stderr
    assert done["direct"].stderr == done["engine"].stderr


@pytest.mark.parametrize("spawn_backend", ["native", "python"], indirect=True)
def test_a_command_that_cannot_start_is_said_the_same_both_ways(tmp_path, spawn_backend):
    unexecutable = tmp_path / "plain"
    unexecutable.write_text("")
    for program, words in (("no-such-program-b65", b"not found on PATH"), (str(unexecutable), b"Permission denied")):
        done = both("--runs", "2", program)
        for result in done.values():
            assert result.returncode == 118 and words in result.stderr, result.stderr
        assert done["direct"].stderr == done["engine"].stderr


def test_a_timed_out_run_is_said_the_same_both_ways():
    done = both("--runs", "2", "--timeout", "100ms", "sleep 30", timeout=SAFETY_NET)
    for result in done.values():
        assert result.returncode == 118 and b"every run of 'sleep 30' timed out" in result.stderr
    assert done["direct"].stderr == done["engine"].stderr


@pytest.mark.parametrize("path", PATHS)
def test_a_member_left_running_is_ended_with_its_sample(tmp_path, path):
    pids = tmp_path / "pids"
    done = bench(path, "--runs", "3", f"sh -c 'sleep 300 & echo $! >> {pids}'", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    left = [int(line) for line in pids.read_text().split()]
    assert len(left) == 3 and not any(pid_alive(pid) for pid in left)


@pytest.mark.parametrize("pump_backend", ["native", "python"], indirect=True)
@pytest.mark.parametrize("path", PATHS)
def test_each_output_mode_gets_the_commands_output(tmp_path, path, pump_backend):
    """``pipe`` is drained while the command writes (300 KB: more than a pipe holds), a FILE
    holds the last run's output, ``null`` and ``inherit`` take it too; ``--input`` feeds stdin."""
    writer = "head -c 300000 /dev/zero"
    for mode in ("pipe", "null", "inherit"):
        done = bench(path, "--runs", "2", "--output", mode, writer, timeout=SAFETY_NET)
        assert done.returncode == 0, (mode, done.stderr)
    kept = tmp_path / "kept"
    source = tmp_path / "input"
    source.write_text("fed\n")
    done = bench(path, "--runs", "2", "--input", source, "--output", kept, "cat", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert kept.read_text() == "fed\n"
    done = bench(path, "--runs", "2", "--output", kept, "echo direct", cwd=tmp_path)
    assert done.returncode == 0 and kept.read_text() == "direct\n"


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    "sent, name, code", [(signal.SIGINT, "Ctrl-C", -signal.SIGINT), (signal.SIGTERM, "SIGTERM", 107)]
)
def test_a_stop_mid_sample_ends_its_tree_and_the_benchmark(tmp_path, path, sent, name, code):
    """Ctrl-C: bench dies by it once released, as hyperfine does; SIGTERM: the reference's 107.
    Either way the engine's words, and the sample's tree (a member below its root) ended."""
    started, pids = tmp_path / "started", tmp_path / "pids"
    command = f"sh -c 'sleep 300 & echo $! > {pids}; echo > {started}; wait'"
    env = dict(os.environ, PROCESSKIT_BENCH_PATH=path)
    process = start_cli("bench", "-N", "--style", "none", "--runs", "3", command, cwd=tmp_path, env=env)
    try:
        wait_for_file(started)
        process.send_signal(sent)
        _, stderr = process.communicate(timeout=SAFETY_NET)
    finally:
        process.kill()
    assert process.returncode == code, stderr
    said = f'processkit-cli: benchmark stopped during "{command}": run cancelled ({name}): sent SIGTERM'
    assert stderr.startswith(said.encode()), stderr
    assert not pid_alive(int(pids.read_text()))


@pytest.mark.parametrize("path", PATHS)
def test_a_lasting_sample_is_listed_and_cancelled_from_outside(tmp_path, path, late_publication):
    """Published once it has run the late publication's wait: ``list`` shows it, ``cancel``
    ends it as the control plane's cancel (the run's failure said, the benchmark's 118)."""
    started = tmp_path / "started"
    env = dict(os.environ, PROCESSKIT_BENCH_PATH=path)
    process = start_cli(
        "bench", "-N", "--style", "none", "--runs", "2", f"sh -c 'echo > {started}; exec sleep 300'", env=env
    )
    try:
        wait_for_file(started)
        runs = listed_when(lambda runs: len(runs) == 1)
        (run_id,) = runs
        assert run_cli("cancel", "--run-id", run_id).returncode == 0
        _, stderr = process.communicate(timeout=SAFETY_NET)
    finally:
        process.kill()
    assert process.returncode == 118, stderr
    assert b"cancelled by a control-plane command" in stderr, stderr


def test_a_containment_the_direct_path_is_refused_goes_to_the_engine(monkeypatch):
    """A refused ``containment.create`` (a cap or group the host will not give) is carried by
    the engine, which reports it in its words; here the refusal is the first call's alone, so
    the engine's own try succeeds and the sample is measured."""
    from processkit import containment
    from processkit.benchmark import driver
    from processkit.benchmark.plan import Options

    real, calls = containment.create, []

    def refusing_once(*args):
        calls.append(args)
        if len(calls) == 1:
            raise containment.ContainerError("refused once")
        return real(*args)

    monkeypatch.setattr(containment, "create", refusing_once)
    engine = driver.Engine(Options(), ends_descendants=False)
    try:
        measured = engine.measure(("true",), iteration="0", output="null")
    finally:
        engine.close()
    assert (measured.exit_code, len(calls)) == (0, 2), measured.error


# A fault after the spawn (a bug, say): the figures' read raises once the root has exited and
# left a member running in the sample's groups.
FIGURES_FAIL = """
import sys
from processkit.containment import members

def usage_of(*args, **kwargs):
    raise RuntimeError("injected after the spawn")

members.usage_of = usage_of
from processkit.cli.main import main
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("path", PATHS)
def test_a_fault_after_the_spawn_ends_the_samples_tree(tmp_path, path):
    """Whatever raises once the child exists, its tree is killed before bench goes on (the
    engine's salvage, ``salvage.killed``): no member of the sample outlives it."""
    script, pids = tmp_path / "faulty.py", tmp_path / "pids"
    script.write_text(FIGURES_FAIL)
    command = [sys.executable, str(script), "bench", "-N", "--style", "none", "--runs", "1"]
    done = subprocess.run(
        [*command, f"sh -c 'sleep 300 & echo $! > {pids}'"],
        env=dict(os.environ, PROCESSKIT_BENCH_PATH=path),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=SAFETY_NET,
    )
    assert done.returncode != 0 and b"injected after the spawn" in done.stderr, done.stderr
    assert not pid_alive(int(pids.read_text())), done.stderr


@pytest.mark.parametrize("path", PATHS)
def test_a_timeout_counts_from_its_samples_spawn(tmp_path, path):
    """The timeout of a sample that follows 300 samples taken with no turn of the loop (each
    exit seen by the spawn's linger) still runs its whole length from that sample's start: the
    one sample that sleeps on is ended no earlier than ``--timeout`` after the sample before it
    said it was running (a file's time, the kernel's: before the slow sample's spawn, whatever
    the load; a timed-out sample has no time of its own in bench's figures)."""
    count, before = tmp_path / "count", tmp_path / "before"
    count.write_text("0")  # the shell's builtins alone: each fast sample ends within the spawn's linger
    slow = (
        f"read n < {count}; echo $((n + 1)) > {count}; "
        f"if [ $n -eq 299 ]; then echo > {before}; elif [ $n -eq 300 ]; then exec sleep 300; fi"
    )
    timeout_ms = 800
    done = bench(path, "--runs", "302", "-i", "--timeout", f"{timeout_ms}ms", f"sh -c '{slow}'", cwd=tmp_path)
    ended = time.time()  # bench is gone: the slow sample's tree was killed before
    assert done.returncode == 0, done.stderr
    assert ended - before.stat().st_mtime >= timeout_ms / 1000


@pytest.mark.parametrize("path", PATHS)
def test_a_timeout_counts_from_the_clock_not_the_loops_last_turn(monkeypatch, path):
    """A loop whose notion of now is behind the clock (no turn since an exit the spawn's linger
    saw) arms no sample's timeout early: the sample, from its spawn to its root's reaping, lasts
    at least its timeout (the figures the driver reads, ``measured_from``'s outcome)."""
    from processkit.benchmark import driver
    from processkit.benchmark.plan import Options

    monkeypatch.setenv("PROCESSKIT_BENCH_PATH", path)
    outcomes, real = [], driver.measured_from
    monkeypatch.setattr(driver, "measured_from", lambda outcome: outcomes.append(outcome) or real(outcome))
    timeout_ms = 100
    engine = driver.Engine(Options(timeout_ms=timeout_ms), ends_descendants=False)
    try:
        engine.host.loop.now -= 5  # the last turn long ago
        measured = engine.measure(("sleep", "30"), iteration="0", output="null")
    finally:
        engine.close()
    (outcome,) = outcomes
    assert measured.timed_out, measured.error
    assert outcome.ended_ns - outcome.started_ns >= timeout_ms * 1_000_000


# The teardown outlasts the publication's time (a member slow to die, say): a publication made
# during it is said on stderr. The sample ends well within that time (its root exits at once).
TEARDOWN_OUTLASTS_PUBLICATION = """
import sys
from processkit import spec
from processkit.benchmark import direct
from processkit.engine import publishing, teardown, waits

real_end, real_late, tearing = direct.end, publishing.late, []


def end(loop, *args):
    tearing.append(True)
    try:
        yield from waits.wait_until(lambda: False, loop.clock() + spec.LATE_PUBLICATION_MS / 1000)
        return (yield from real_end(loop, *args))
    finally:
        tearing.pop()


def late(*args):
    if tearing:
        sys.stderr.write("published during its teardown\\n")
    return real_late(*args)


direct.end = teardown.end = end
direct.late = publishing.late = late
from processkit.cli.main import main
raise SystemExit(main(sys.argv[1:]))
"""


def patched_bench(tmp_path, script: str, path: str, *args) -> subprocess.CompletedProcess:
    """``bench`` in a process that ran ``script``'s patches first (then the CLI's main)."""
    patched = tmp_path / "patched.py"
    patched.write_text(script)
    return subprocess.run(
        [sys.executable, str(patched), "bench", "-N", "--style", "none", *args],
        env=dict(os.environ, PROCESSKIT_BENCH_PATH=path),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=SAFETY_NET,
        cwd=tmp_path,
    )


@pytest.mark.parametrize("spawn_backend", ["python"], indirect=True)  # no linger: the exit is the loop's to see
@pytest.mark.parametrize("path", PATHS)
def test_a_sample_is_not_published_once_its_ending_is_decided(tmp_path, path, spawn_backend):
    """A sample whose root exits before the late publication's time and leaves a member to kill
    is not published while it is torn down (its timers cancelled once the ending is decided, as
    the engine's): no registry record, control socket or tombstone for a run already ending."""
    pids = tmp_path / "pids"
    done = patched_bench(
        tmp_path, TEARDOWN_OUTLASTS_PUBLICATION, path, "--runs", "2", f"sh -c 'sleep 300 & echo $! >> {pids}'"
    )
    assert (done.returncode, done.stderr) == (0, b"")
    left = [int(line) for line in pids.read_text().split()]
    assert len(left) == 2 and not any(pid_alive(pid) for pid in left)


# Each sample's container release fails (after giving the container back).
RELEASE_FAILS = """
import sys
from processkit import containment

real = containment.create


def create(*args):
    container = real(*args)
    release = container.release

    def failing():
        release()
        raise RuntimeError("injected in the release")

    container.release = failing
    return container


containment.create = create
from processkit.cli.main import main
raise SystemExit(main(sys.argv[1:]))
"""


def test_a_release_that_fails_is_the_runners_failure_both_ways(tmp_path):
    """A step of the sample's release that fails leaves the rest running, is warned of once, and
    makes the sample the runner's own failure (``internal``), as the engine's release does."""
    done = {path: patched_bench(tmp_path, RELEASE_FAILS, path, "--runs", "2", "true") for path in PATHS}
    for result in done.values():
        assert result.returncode == 118, result.stderr
        assert result.stderr.decode().splitlines() == [
            "processkit-cli: warning: the run's release was incomplete: RuntimeError: injected in the release",
            "processkit-cli: cannot benchmark 'true': internal error: RuntimeError: injected in the release",
        ]


def test_an_interrupt_out_of_a_carried_wait_closes_the_steps_at_once():
    """``waits.carried`` (the direct sample's teardown and salvage): a KeyboardInterrupt out of
    the loop's turn closes the steps, whose finally blocks run then, not once the collector (or
    the traceback's end, which holds their frame) gets to them."""
    from processkit.engine.waits import Wait, carried

    closed = []

    def steps():
        try:
            yield Wait(lambda: False)
        finally:
            closed.append("closed")

    class Interrupted:
        def run_until(self, done, deadline, poll):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as raised:
        carried(Interrupted(), steps())
    assert closed == ["closed"], raised.traceback  # the traceback still held here


def test_a_ctrl_c_under_the_json_error_format_writes_no_envelope(tmp_path):
    """Dying by SIGINT, ``bench`` has no exit code for an envelope's ``code`` to equal
    (docs/exit-codes.md): stderr stays empty, as ``batch``'s does."""
    started = tmp_path / "started"
    process = start_cli(
        "--error-format", "json", "bench", "-N", "--style", "none", "--runs", "3",
        f"sh -c 'echo > {started}; exec sleep 300'", cwd=tmp_path,
    )  # fmt: skip
    try:
        wait_for_file(started)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=SAFETY_NET)
    finally:
        process.kill()
    assert (process.returncode, stderr) == (-signal.SIGINT, b"")
