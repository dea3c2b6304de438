"""When ``bench`` opens its perf events (issue 49), the CLI's own ``main`` run in a process whose
``perf_event_open`` logs each call: the process making it, its result, and the children the
session's process has at that moment (a zombie included). A helper forked by that process
logs through the same function.

- Start-up turns the kernel's per-task perf switch on in a helper process
  (``benchmark/perf_switch.py``): the session's first perf event would otherwise wait out an
  RCU grace period in ``perf_event_open`` after the whole start-up, on the benchmark's wall time.
- With no ``--prepare``/``--conclude`` between runs, the next command run's counters are opened
  while a run goes on, once its child exists (``driver.Engine``'s ``ahead``): opened after that
  child's clone, they count only the next run; a step that runs between two command runs (a
  setup, a cleanup) closes them before its own spawn."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

LOGGED = textwrap.dedent(
    """
    import json, os, sys
    from processkit.benchmark import counters, exit_clock

    log, main_pid = sys.argv[1], os.getpid()
    real = counters.perf_event_open

    def parent(pid):
        try:
            with open(f"/proc/{pid}/stat") as handle:
                return int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return None

    def logged(attr, cpu=-1):
        fd = real(attr, cpu)
        entry = {"pid": os.getpid(), "fd": fd, "children": []}
        if os.getpid() == main_pid:
            entry["children"] = [pid for pid in os.listdir("/proc") if pid.isdigit() and parent(pid) == main_pid]
        with open(log, "a") as handle:
            handle.write(json.dumps(entry) + "\\n")
        return fd

    counters.perf_event_open = exit_clock.perf_event_open = logged
    sys.argv = ["processkit-cli", *sys.argv[2:]]
    from processkit.cli.main import entry

    entry()
    """
)


def _bench(tmp_path, *args) -> tuple[list[dict], list[dict], dict]:
    """(every open, the session process's opens, the JSON export) of ``bench -N ARGS``."""
    log, out = tmp_path / "opens.jsonl", tmp_path / "bench.json"
    log.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", LOGGED, str(log), "bench", "-N", "--style", "none", "--export-json", str(out), *args],
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    opens = [json.loads(line) for line in log.read_text().splitlines()]
    pids = [entry["pid"] for entry in opens]
    session = [entry for entry in opens if entry["pid"] == max(set(pids), key=pids.count)]  # many opens
    if not any(entry["fd"] >= 0 for entry in session):
        pytest.skip("perf events are refused here (perf_event_paranoid, seccomp)")
    return opens, session, json.loads(out.read_text())


def test_the_first_perf_event_is_a_helpers_collected_before_the_sessions_first(tmp_path):
    opens, session, _ = _bench(tmp_path, "--runs", "2", "true")
    first, pids = opens[0], {entry["pid"] for entry in opens}
    assert first["pid"] != session[0]["pid"], opens  # the helper's open came first
    assert len(pids) == 2 and len(opens) == len(session) + 1, opens  # one helper, one open
    assert first["fd"] >= 0, opens  # it turned the switch on: the session's opens then find it on
    assert session[0]["children"] == [], opens  # collected before the session's first open (no zombie)


def test_the_next_runs_counters_are_opened_while_a_run_goes_on(tmp_path):
    _, session, exported = _bench(tmp_path, "--runs", "3", "sleep 0.2")
    during = [entry for entry in session if entry["children"]]
    assert len(during) >= 2 * 3, session  # runs 2 and 3 (and one more, closed at the end): three counters each
    faults = exported["results"][0]["counters"]["page_faults"]
    assert len(faults) == 3 and all(count is not None for count in faults), faults


def test_a_step_between_runs_keeps_the_counters_after_it(tmp_path):
    """A setup with many page faults between the first command's last run and the second's
    first: counted into no run (the counters opened ahead closed before it)."""
    _, _, plain = _bench(tmp_path, "--runs", "3", "sleep 0.2")
    own = max(plain["results"][0]["counters"]["page_faults"])
    setup = f"{sys.executable} -c pass"
    _, session, exported = _bench(
        tmp_path, "--runs", "3", "--order", "sequential", "--setup", setup, "sleep 0.2", "sleep 0.2"
    )
    for result in exported["results"]:
        faults = result["counters"]["page_faults"]
        assert max(faults) < 3 * own, (faults, own)  # an interpreter's start-up faults far more
    assert any(entry["children"] for entry in session), session  # opened ahead between the commands' own runs
