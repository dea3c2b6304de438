"""``--fail-if-slower`` under a CPU quota, as ``docker --cpus`` or systemd's ``CPUQuota=`` set one
on a CI runner's group: the quota stops the runs once their group used it for the period, so a
CPU-bound command's wall time stretches while the host's CPUs look idle, and the gate judged it
by wall time without a word (a false 119), or, the baseline recorded throttled, passed a later
regression. The throttling of the runs' groups and their ancestors is now read (cgroup
``cpu.stat``), counted as a busy machine is, and said (``processkit/benchmark/throttle.py``).

The quota is a group of the test's own, v2 (``cpu.max``, where the hierarchy's root enables the
``cpu`` controller for its children) or v1 (``cpu.cfs_quota_us``), and ``bench`` is moved into
it before it execs."""

from __future__ import annotations

import json
import os
import random
import shutil

import cpu_alone
import pytest

from conftest import run_cli
from processkit.benchmark.gate import BUSY_SHARE
from processkit.containment import cgroup_v1, cgroup_v2
from streams import wait_until

pytestmark = pytest.mark.skipif(shutil.which("gzip") is None, reason="gzip is the CPU-bound command")
PERIOD_US, QUOTA_US = 10_000, 1_000  # 0.1 CPUs, a short period: the holding evens out over a run


def _v2_group(name: str) -> tuple[str, str]:
    mount, _ = cgroup_v2.own_group()
    if mount is None:
        pytest.skip("no cgroup2 mount on this host")
    enabled = open(os.path.join(mount, "cgroup.subtree_control")).read().split()
    if "cpu" not in enabled:
        pytest.skip("the cgroup2 root does not enable the cpu controller for its children (a hybrid host's v1 has it)")
    return _made(os.path.join(mount, name), ("cpu.max", f"{QUOTA_US} {PERIOD_US}")), "cgroup.procs"


def _v1_group(name: str) -> tuple[str, str]:
    parent = cgroup_v1.own_groups().get("cpu")
    if parent is None or not os.path.exists(os.path.join(parent, "cpu.cfs_quota_us")):
        pytest.skip("no cgroup v1 cpu hierarchy on this host")
    quota = (("cpu.cfs_period_us", str(PERIOD_US)), ("cpu.cfs_quota_us", str(QUOTA_US)))
    return _made(os.path.join(parent, name), *quota), "cgroup.procs"


def _made(group: str, *settings: tuple[str, str]) -> str:
    """``group`` made and each file of ``settings`` written; removed again where one is refused
    (EINVAL, EACCES), as the fixture skips then and its teardown never comes."""
    os.mkdir(group)
    try:
        for name, value in settings:
            _write(group, name, value)
    except OSError:
        os.rmdir(group)
        raise
    return group


def _write(group: str, name: str, value: str) -> None:
    with open(os.path.join(group, name), "w") as handle:
        handle.write(value)


@pytest.fixture(params=["v2", "v1"])
def quota(request):
    """A group of the test's own with a quota of 0.1 CPUs, and a ``preexec_fn`` that moves the
    process about to exec into it; removed once empty."""
    if os.geteuid() != 0:
        pytest.skip("making a cpu group with a quota and moving a process into it needs root")
    name = f"gate-throttle-test-{os.getpid()}"
    try:
        group, procs = (_v2_group if request.param == "v2" else _v1_group)(name)
    except OSError as exc:
        pytest.skip(f"no {request.param} cpu group with a quota this test may make: {exc}")

    def join() -> None:
        _write(group, procs, str(os.getpid()))

    yield join
    wait_until(lambda: _removed(group), what=f"{group} emptied")  # bench was collected by run_cli: soon empty


def _removed(group: str) -> bool:
    try:
        os.rmdir(group)
    except OSError:
        return not os.path.exists(group)
    return True


def _bench(tmp_path, name: str, out: str, *extra, preexec_fn=None):
    return run_cli(
        "bench", "-N", "--runs", "5", "-n", "work", f"gzip -5 -c {name}", "--export-json", tmp_path / out,
        *extra, cwd=tmp_path, preexec_fn=preexec_fn, timeout=120,
    )  # fmt: skip


def _words(tmp_path) -> str:
    draw = random.Random(65)
    words = ["".join(draw.choice("abcdefghij") for _ in range(draw.randint(2, 9))) for _ in range(3000)]
    text = " ".join(draw.choice(words) for _ in range(40_000))
    (tmp_path / "same.txt").write_text(text)
    (tmp_path / "more.txt").write_text(text + " " + text + " " + text)
    return text


def _load(tmp_path, out: str) -> dict:
    return json.loads((tmp_path / out).read_text())["processkit"]["host_load"]


def _uncounted(export: dict) -> dict:
    """``export`` with its runs' perf counters null: where both sides counted instructions the
    gate judges by them first, and these tests are about the figures after them (a host with a
    hardware PMU would count them)."""
    for result in export["results"]:
        result["counters"] = None
    return export


def _base_uncounted(tmp_path) -> None:
    path = tmp_path / "base.json"
    path.write_text(json.dumps(_uncounted(json.loads(path.read_text()))))


def test_an_unchanged_command_throttled_by_a_quota_is_not_failed_by_its_wall_time(tmp_path, quota):
    _words(tmp_path)
    first = _bench(tmp_path, "same.txt", "base.json")
    assert first.returncode == 0, first.stderr
    _base_uncounted(tmp_path)
    gate = ("--baseline", tmp_path / "base.json", "--fail-if-slower", "5")
    throttled = _bench(tmp_path, "same.txt", "out.json", *gate, preexec_fn=quota)
    shown = throttled.stdout.decode() + throttled.stderr.decode()
    assert "a CPU quota of 0.1 CPU held the runs back" in shown, shown
    assert throttled.returncode == 0, shown
    (decided,) = json.loads((tmp_path / "out.json").read_text())["gate"]["commands"]
    assert decided["outcome"] in ("passed", "inconclusive"), decided
    # by wall time where the baseline's host was busy too: CPU time under half the time the quota left it
    assert decided["figure"] == "cpu" or "of the time its CPU quota left it (it mostly waits" in decided["reason"]
    load = _load(tmp_path, "out.json")  # counted as a busy machine's load is, whatever the others' was
    assert load["cpu_quota"] == 0.1 and load["throttled_share"] >= BUSY_SHARE, load


def test_a_baseline_recorded_throttled_says_so_and_does_not_pass_more_work(tmp_path, quota):
    """The other way round: the baseline's wall times stretched by the quota are slower than a
    later unthrottled run of three times the work, which passed by wall time, unseen."""
    _words(tmp_path)
    first = _bench(tmp_path, "same.txt", "base.json", preexec_fn=quota)
    assert first.returncode == 0, first.stderr
    _base_uncounted(tmp_path)
    later = _bench(tmp_path, "more.txt", "out.json", "--baseline", tmp_path / "base.json", "--fail-if-slower", "5")
    said = later.stdout.decode() + later.stderr.decode()
    assert "a CPU quota of 0.1 CPU held the runs back" in said and "during the baseline's" in said, said
    assert later.returncode == 119, said
    (decided,) = json.loads((tmp_path / "out.json").read_text())["gate"]["commands"]
    assert (decided["figure"], decided["outcome"]) == ("cpu", "regressed"), decided
    assert _load(tmp_path, "base.json")["throttled_share"] >= BUSY_SHARE


def _first(tmp_path, name: str, out: str, *extra):
    """This side's runs pinned, with that CPU to themselves where nice -20 is allowed (``cpu_alone``):
    its load is the test's, not the host's."""
    return run_cli(
        "bench", "-N", "--cpus", cpu_alone.cpu(), "--runs", "5", "-n", "work", f"gzip -5 -c {name}", "--export-json",
        tmp_path / out, *extra, cwd=tmp_path, timeout=120, **cpu_alone.front(),
    )  # fmt: skip


@pytest.mark.parametrize("cpu_quota, base, later", [(0.5, 3, 5), (0.1, 1, 4)])
def test_a_slight_holding_on_the_baselines_side_lets_no_slower_command_through(tmp_path, cpu_quota, base, later):
    """A quota that held the baseline's runs back 0.6 % of the time (a pod's limit, bench's own
    start-up bursts) allowed for ``1 - cpu_quota``: a busy machine's, so a wall-time slowdown of
    up to 100 % (0.5 CPU) or 900 % (0.1 CPU) was inconclusive (exit 0) against a baseline with
    wall time alone (its runs' CPU time null, as a process-group run's). 67 % (0.5 CPU) or 300 %
    (0.1 CPU) more work still fails: the quota held the runs back too little to stretch them so.
    The gate allows for this side's load as well, whatever the baseline's quota, and the suite
    beside it (a CI runner's) made this side busy: the test was skipped in every CI run. Now this
    side's runs keep their CPU (``_first``), and only a load that would explain the slowdown
    (others taking about 40 % or 75 % of the pinned CPU), or this side's own quota holding its
    runs back as a busy machine would (a pod's CPU limit), skips it."""
    text = _words(tmp_path)
    for name, times in (("base.txt", base), ("later.txt", later)):
        (tmp_path / name).write_text(" ".join([text] * times))
    first = _first(tmp_path, "base.txt", "base.json")
    assert first.returncode == 0, first.stderr
    recorded = _uncounted(json.loads((tmp_path / "base.json").read_text()))
    # the rest of the baseline's host quiet, as a CI pod's with a 500m limit reads
    recorded["processkit"]["host_load"].update(others_cpu_share=0.0, throttled_share=0.006, cpu_quota=cpu_quota)
    for result in recorded["results"]:
        result["user_times"] = result["system_times"] = [None] * len(result["times"])
    (tmp_path / "base.json").write_text(json.dumps(recorded))
    gated = _first(tmp_path, "later.txt", "out.json", "--baseline", tmp_path / "base.json", "--fail-if-slower", "5")
    said = gated.stdout.decode() + gated.stderr.decode()
    (decided,) = json.loads((tmp_path / "out.json").read_text())["gate"]["commands"]
    load = _load(tmp_path, "out.json")
    others, held = load["others_cpu_share"], load["throttled_share"]
    if others is None or (others >= BUSY_SHARE and decided["change_percent"] <= 100 * others / (1 - others)):
        pytest.skip(f"others took {others} of the pinned CPU, which explains the slowdown: {decided}")
    if held is not None and held >= BUSY_SHARE:
        pytest.skip(f"this side's own CPU quota held its runs back {held} of the time, as a busy machine: {decided}")
    assert gated.returncode == 119, said
    assert (decided["figure"], decided["outcome"]) == ("wall", "regressed"), decided
    assert f"a CPU quota of {cpu_quota:g} CPU held the runs back 1 % of the time during the baseline's" in said, said
