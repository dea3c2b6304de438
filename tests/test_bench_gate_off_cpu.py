"""A command that now waits longer (an added ``sleep 0.1``), gated while the host is loaded by CPU
hogs of the test's own: before, no figure the gate read told the longer sleep from a longer wait
for a CPU, so the load's stretch covered it (``inconclusive`` or ``passed``, exit 0). Each run's
off-CPU time (wall less the tree's CPU and its group's wait for a CPU, ``cpu.pressure``) tells
them apart where the runs had one CPU (``--cpus``), and the gate says ``regressed`` by it
(``benchmark/gate_off_cpu.py``). The same command beside the hogs alone is not a regression, and
a baseline without the figure (an export from before it) is judged as before.

The hogs are pinned to the CPU the runs are given and report when they spin (their first line);
each is ended by its PID. No time is asserted: the verdicts and the figure they rest on are."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import pytest

from conftest import run_cli
from processkit.benchmark.baseline import shown_change

CPU = min(os.sched_getaffinity(0))
WORK = "i=0; while [ $i -lt 60000 ]; do i=$((i+1)); done"  # tens of ms of the shell's own CPU
CPUS = sorted(os.sched_getaffinity(0))
HOG = "import os\nos.sched_setaffinity(0, {})\nprint('spinning', flush=True)\nwhile True:\n    pass\n"
# perf refused to the exit clock alone, as seccomp refuses it (-EPERM): the loop's reap ends each run
NO_EXIT_CLOCK = ("processkit.benchmark.exit_clock", "perf_event_open", "lambda attr, cpu=-1: -1")
HOGS = 3  # the runs get about a quarter of their CPU: the load's stretch covers a 0.1 s sleep


class Hogs:
    """CPU-bound processes on the runs' CPU (or CPUs), started and ended by the test (by PID)."""

    def __init__(self, cpus: list[int] | None = None, count: int = HOGS):
        self.hog, self.count = HOG.format(set(cpus or [CPU])), count

    def __enter__(self) -> Hogs:
        self.procs: list[subprocess.Popen] = []
        try:
            for _ in range(self.count):  # each one ours as soon as it exists: ended below if a later one fails
                self.procs.append(subprocess.Popen([sys.executable, "-c", self.hog], stdout=subprocess.PIPE))
            for proc in self.procs:
                assert proc.stdout is not None
                said = proc.stdout.readline()
                assert said == b"spinning\n", said  # each one spins now
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()
            assert proc.stdout is not None
            proc.stdout.close()


def _bench(tmp_path, name: str, command: str, *more, patched: tuple[str, ...] | None = None, one_cpu: bool = True):
    out = tmp_path / f"{name}.json"
    given = ("--cpus", str(CPU)) if one_cpu else ()
    args = ("bench", "--runs", "6", *given, "-n", "work", command, "--export-json", out, *more)
    done = run_cli(*args, cwd=tmp_path, patched=patched)
    return done, json.loads(out.read_text())


def _baseline(tmp_path, loaded: bool):
    with Hogs() if loaded else contextlib.nullcontext():
        done, export = _bench(tmp_path, "base", f"sh -c '{WORK}'")
    assert done.returncode == 0, done.stderr
    assert export["processkit"]["host_load"]["affinity_cpus"] == 1, export["processkit"]  # --cpus named one
    (result,) = export["results"]
    if None in result["off_cpu_times"]:
        pytest.skip("no wait for a CPU read per run here (no cgroup v2 group with cpu.pressure, or the engine's path)")
    return tmp_path / "base.json"


def _gated(tmp_path, baseline, command: str):
    with Hogs():
        done, export = _bench(tmp_path, "later", command, "--baseline", baseline, "--fail-if-slower", "10")
    (decided,) = export["gate"]["commands"]
    return done, decided, done.stdout.decode() + done.stderr.decode()


def test_a_longer_sleep_beside_cpu_hogs_regressed_by_the_off_cpu_time(tmp_path):
    baseline = _baseline(tmp_path, loaded=True)
    done, decided, said = _gated(tmp_path, baseline, f"sh -c '{WORK}; sleep 0.1'")
    assert decided["figure"] == "off_cpu" and decided["outcome"] == "regressed", decided
    assert done.returncode == 119, said
    assert "by the off-CPU time (wall time less CPU time and the wait for a CPU" in said, said
    assert "its median grew by" in said and "it waits longer (sleep, I/O, a lock)" in said, said
    # the growth as a share of the baseline's own time, not a second "% slower" beside the baseline
    # block's slowdown by the mean (both the gate's line and the failure's)
    grew = f"'work': its off-CPU time grew by {shown_change(decided['change_percent'])} % of the baseline's own time"
    assert said.count(grew) == 2 and "% slower than the baseline" not in said, said


def test_the_same_command_beside_cpu_hogs_alone_is_no_regression(tmp_path):
    baseline = _baseline(tmp_path, loaded=False)
    done, decided, said = _gated(tmp_path, baseline, f"sh -c '{WORK}'")
    assert decided["figure"] != "off_cpu" and decided["outcome"] != "regressed", decided
    assert done.returncode == 0, said


def _without_figure(export: dict) -> None:
    for result in export["results"]:
        del result["off_cpu_times"]  # an export from before the figure


def _stolen(export: dict) -> None:
    export["processkit"]["host_load"]["steal_share"] = 0.02  # a KVM guest's neighbours took 2 % of the CPU


def _wider(export: dict) -> None:
    export["processkit"]["host_load"]["affinity_cpus"] = 2  # one /proc/stat line (lxcfs), the runs on two CPUs


@pytest.mark.parametrize("crafted", [_without_figure, _stolen, _wider], ids=lambda crafted: crafted.__name__[1:])
def test_a_baseline_the_rule_cannot_trust_is_judged_as_before(tmp_path, crafted):
    """An export from before the figure; one whose runs' CPU a hypervisor stole from (its steal
    reads as off-CPU time); one whose runs were given more than one CPU (their waits read low)."""
    baseline = _baseline(tmp_path, loaded=True)
    old = json.loads(baseline.read_text())
    crafted(old)
    baseline.write_text(json.dumps(old))
    done, decided, said = _gated(tmp_path, baseline, f"sh -c '{WORK}; sleep 0.1'")
    assert decided["figure"] != "off_cpu" and "by the off-CPU time" not in decided["reason"], decided
    assert done.returncode in (0, 119), said
    # the runs given two CPUs on a side, the machine busy: said plainly where it did not regress
    wide = "on 2 CPUs it could not tell a longer wait" in decided["reason"]
    assert wide == (crafted is _wider and decided["outcome"] != "regressed"), decided


def test_without_the_kernels_exit_time_no_off_cpu_time_is_read(tmp_path):
    """Where perf is refused (Docker's default seccomp, ``perf_event_paranoid`` 3) the run's end is
    when the loop reaped the root, after ``bench``'s own wait for a CPU, which its group's
    ``cpu.pressure`` does not hold: beside load that read as off-CPU time the command never had."""
    done, timed = _bench(tmp_path, "timed", "true")
    assert done.returncode == 0, done.stderr
    if None in timed["results"][0]["off_cpu_times"]:
        pytest.skip("no off-CPU time read here even with the exit clock (no cpu.pressure, no perf)")
    done, untimed = _bench(tmp_path, "untimed", "true", patched=NO_EXIT_CLOCK)
    assert done.returncode == 0, done.stderr
    (result,) = untimed["results"]
    assert result["off_cpu_times"] == [None] * 6, result["off_cpu_times"]
    assert None not in result["cpu_times"], result  # the other figures are read as before


def test_steal_beyond_the_noticed_share_leaves_the_rule_unjudged():
    """``host_load.steal_share`` up to ``NOTICED`` (0.5 % of the CPU's time, "0 %" once rounded)
    is judged; beyond it, or unread, or with more than one CPU given, not."""
    from processkit.benchmark.gate_off_cpu import judged
    from processkit.benchmark.host_load import NOTICED, Load

    one = Load(affinity=1, steal=NOTICED)
    assert judged(one, one)
    for other in (Load(affinity=1, steal=0.006), Load(affinity=1), Load(affinity=2, steal=0.0), None):
        assert not judged(one, other) and not judged(other, one), other


def test_on_several_cpus_the_gate_says_it_could_not_tell_a_longer_wait(tmp_path):
    """The runs free to move between the CPUs, hogs on all of them on both sides: the group's
    ``cpu.pressure`` counts part of a moving tree's wait, so the off-CPU time is not judged, and
    the longer sleep reads as the load's (``passed`` by CPU time, or ``inconclusive``). The gate
    says so plainly, never as though it had looked for a longer wait and found none."""
    if len(CPUS) < 2:
        pytest.skip("one CPU here: the runs cannot move between CPUs")
    hogs = Hogs(CPUS, HOGS * len(CPUS))
    with hogs:
        done, export = _bench(tmp_path, "base", f"sh -c '{WORK}'", one_cpu=False)
    assert done.returncode == 0, done.stderr
    assert export["processkit"]["host_load"]["affinity_cpus"] == len(CPUS), export["processkit"]
    with hogs:
        more = ("--baseline", tmp_path / "base.json", "--fail-if-slower", "10")
        done, export = _bench(tmp_path, "later", f"sh -c '{WORK}; sleep 0.1'", *more, one_cpu=False)
    (decided,) = export["gate"]["commands"]
    said = done.stdout.decode() + done.stderr.decode()
    assert decided["outcome"] != "regressed" and done.returncode == 0, said
    words = f"on {len(CPUS)} CPUs it could not tell a longer wait (sleep, I/O, a lock) from a longer wait for a CPU"
    assert words in decided["reason"] and words in said, said
    assert "(--cpus N naming one CPU has it judged)" in said, said


def test_the_words_on_several_cpus_only_where_both_sides_say_how_many():
    """A baseline that records no affinity (hyperfine's, an export from before it) lacks the
    figure whatever the CPUs: no words on CPUs there; one CPU on both: the rule was judged."""
    from processkit.benchmark.gate_off_cpu import untold
    from processkit.benchmark.host_load import Load

    one, two = Load(affinity=1, steal=0.0), Load(affinity=2, steal=0.0)
    assert untold(one, one, "--cpus N") is None
    assert untold(two, Load(), "--cpus N") is None and untold(two, None, "--cpus N") is None
    said = untold(one, two, "cpus=N")
    assert said is not None and said.startswith("; on 2 CPUs it could not tell") and "(cpus=N naming one" in said
