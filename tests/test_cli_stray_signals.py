"""A child's signal meant for "its parent" (``kill -USR1 $PPID``: an X server's readiness, a timer's
SIGALRM, a real-time one) reaches the CLI's runner, its parent: at their default these ended
``run``, ``batch`` and ``bench`` on the spot, the run's output after it lost, its stream cut before
``runner_exit``, the exit code the signal's (138, 140, ...) and, for a batch, every other job's
line lost with it. The runner drops them as the API's service does (``engine.signals``:
``STRAY_SIGNALS``); its stop signals keep their meaning (tests/test_run_signals.py). The kernel's
own SIGXCPU (a soft CPU limit) and SIGSYS (a seccomp trap) are not dropped: they must still end the
runner. A sent SIGSEGV, SIGBUS, SIGFPE or SIGILL is dropped too, while a real fault still ends the
runner (``engine.signals.guard_faults``, tests/test_fault_guard.py). Every child gets the dropped ones at their
default, one inherited as ignored stays so."""

from __future__ import annotations

import json
import signal

import pytest

from conftest import read_events, run_cli
from own_tmp import own_tmp  # noqa: F401

# The child signals its runner, then says so and exits 3: the runner must live to echo that line
# and hand on the 3.
SIGNALLER = "kill -{} $PPID; echo after-the-signal; exit 3"


@pytest.mark.parametrize("signame", ["USR1", "USR2", "ALRM", "RTMIN", "SEGV", "BUS", "FPE", "ILL"])
def test_a_childs_signal_to_its_runner_does_not_end_the_run(tmp_path, pump_backend, signame):
    stream = tmp_path / "run.jsonl"
    done = run_cli("run", "--jsonl", stream, "--", "sh", "-c", SIGNALLER.format(signame), cwd=tmp_path)
    assert done.returncode == 3, done.stderr.decode()
    assert done.stdout == b"after-the-signal\n"
    ends = [event for event in read_events(stream) if event["event"] == "runner_exit"]
    assert [(event["code"], event["source"]) for event in ends] == [(3, "child_exit")]


# The child (grep, exec'ed by sh) prints its own dispositions, then its runner's.
DISPOSITIONS = "exec grep -E '^Sig(Ign|Cgt|Blk)' /proc/self/status /proc/$PPID/status"
DROPPED = (signal.SIGUSR2, signal.SIGALRM, signal.SIGVTALRM, signal.SIGPROF, signal.SIGIO, signal.SIGABRT)
KERNELS = (signal.SIGXCPU, signal.SIGSYS)
FAULTS = (signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL)  # guarded in C, or blocked (the Python pump)


def _masks(output: bytes) -> dict[tuple[str, str], int]:
    """(whose: self or the parent, SigIgn or SigCgt) -> the mask, from grep's ``FILE:Sig...:\tHEX`` lines."""
    masks = {}
    for line in output.decode().replace("\r", "").splitlines():
        path, name, value = line.split(":")
        masks[("self" if "/self/" in path else "parent", name)] = int(value, 16)
    return masks


def _has(mask: int, number: int) -> bool:
    return bool(mask >> (number - 1) & 1)


@pytest.mark.parametrize("pty", [False, True])
def test_the_child_gets_the_dropped_signals_at_their_default(tmp_path, pump_backend, spawn_backend, pty):
    flags = ["--pty"] if pty else []
    done = run_cli("run", "--jsonl", tmp_path / "run.jsonl", *flags, "--", "sh", "-c", DISPOSITIONS, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    masks = _masks(done.stdout)
    assert all(_has(masks["parent", "SigCgt"], number) for number in DROPPED), masks
    assert not any(_has(masks["parent", "SigCgt"], number) for number in KERNELS), "the kernel's are not dropped"
    assert not any(_has(masks["self", "SigIgn"], number) for number in (*DROPPED, *KERNELS, *FAULTS)), masks
    guarded = masks["parent", "SigCgt"] | masks["parent", "SigBlk"]
    assert all(_has(guarded, number) for number in FAULTS), masks
    assert not any(_has(masks["self", "SigBlk"], number) for number in FAULTS), "the child's are at their default"


def test_one_inherited_as_ignored_stays_ignored(tmp_path, spawn_backend):
    def ignoring():
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)

    done = run_cli(
        "run", "--jsonl", tmp_path / "run.jsonl", "--", "sh", "-c", DISPOSITIONS, cwd=tmp_path, preexec_fn=ignoring
    )
    assert done.returncode == 0, done.stderr.decode()
    masks = _masks(done.stdout)
    assert _has(masks["self", "SigIgn"], signal.SIGUSR2) and _has(masks["parent", "SigIgn"], signal.SIGUSR2), masks
    assert not _has(masks["self", "SigIgn"], signal.SIGALRM), masks


def test_the_kernels_cpu_limit_still_ends_the_runner(tmp_path, isolated_registry, own_tmp):  # noqa: F811
    """``prlimit --cpu=1:unlimited``: SIGXCPU at the soft limit, no SIGKILL after it. A child's
    ``kill -XCPU $PPID`` stands in for the kernel's (the runner cannot tell them apart). What the
    dead runner left is pruned, as after any runner's death (tests/test_faults.py)."""
    stream = tmp_path / "run.jsonl"
    done = run_cli("run", "--jsonl", stream, "--", "sh", "-c", SIGNALLER.format("XCPU"), cwd=tmp_path)
    pruned = run_cli("prune", "--json")
    assert done.returncode == -signal.SIGXCPU, (done.returncode, done.stderr.decode())
    assert pruned.returncode == 0, pruned.stderr.decode()


def test_a_jobs_signal_to_its_runner_does_not_end_the_batch(tmp_path, pump_backend):
    out = tmp_path / "out"
    done = run_cli(
        "batch", "--out", out, "--", "sh", "-c", "kill -{} $PPID; exit 0", ":::", "USR2", "ALRM", "SEGV", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr.decode()
    lines = [json.loads(line) for line in (out / "summary.jsonl").read_text().splitlines()]
    assert sorted(line["exit_code"] for line in lines if "exit_code" in line) == [0, 0, 0], lines


def test_a_benchmarked_commands_signal_to_its_runner_does_not_end_the_benchmark(tmp_path, pump_backend):
    export = tmp_path / "bench.json"
    command = "kill -USR1 $PPID; kill -ALRM $PPID; kill -BUS $PPID"
    done = run_cli("bench", "--runs", "2", "--style", "none", "--export-json", export, command, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert len(json.loads(export.read_text())["results"][0]["times"]) == 2


def test_a_real_fault_still_ends_the_runner(tmp_path, pump_backend):
    """The guard drops only a sent fault signal: the runner's own fault, right after the guard is
    on (here a read of address 0 where the stray signals' handlers would go in), still ends it by
    SIGSEGV, in C (the action put back) and in the Python pump's fallback (the signal blocked)."""
    fault = "lambda also=(): __import__('ctypes').string_at(0)"
    done = run_cli(
        "run", "--jsonl", tmp_path / "run.jsonl", "--", "true", cwd=tmp_path, patched=("signals", "drop_strays", fault)
    )
    assert done.returncode == -signal.SIGSEGV, (done.returncode, done.stderr.decode())
