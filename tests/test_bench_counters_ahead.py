"""A command run's perf counters opened while the run before it goes on (issue 49,
``driver.Engine``'s ``ahead``): with no ``--prepare``/``--conclude`` between two runs, the next
run's counters are opened once the running child exists, off the path from its exit to the next
child's exec. Opened after that child's clone, they count only the next run; a step that does
run between two command runs (a setup, a cleanup) closes them before its own spawn.

The CLI's own ``main`` runs in a process whose ``counters.perf_event_open`` logs, at each open,
the children the session's process has then."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

LOGGED = textwrap.dedent(
    """
    import json, os, sys
    from processkit.benchmark import counters

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
        if os.getpid() == main_pid:
            children = [pid for pid in os.listdir("/proc") if pid.isdigit() and parent(pid) == main_pid]
            with open(log, "a") as handle:
                handle.write(json.dumps({"fd": fd, "children": children}) + "\\n")
        return fd

    counters.perf_event_open = logged
    sys.argv = ["processkit-cli", *sys.argv[2:]]
    from processkit.cli.main import entry

    entry()
    """
)


def _bench(tmp_path, *args) -> tuple[list[dict], dict]:
    log, out = tmp_path / "opens.jsonl", tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, "-c", LOGGED, str(log), "bench", "-N", "--style", "none", "--export-json", str(out), *args],
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    opens = [json.loads(line) for line in log.read_text().splitlines()]
    if not any(entry["fd"] >= 0 for entry in opens):
        pytest.skip("perf events are refused here (perf_event_paranoid, seccomp)")
    return opens, json.loads(out.read_text())


def test_the_next_runs_counters_are_opened_while_a_run_goes_on(tmp_path):
    opens, exported = _bench(tmp_path, "--runs", "3", "sleep 0.2")
    during = [entry for entry in opens if entry["children"]]
    assert len(during) >= 2 * 3, opens  # runs 2 and 3 (and one more, closed at the end): three counters each
    faults = exported["results"][0]["counters"]["page_faults"]
    assert len(faults) == 3 and all(count is not None for count in faults), faults


def test_a_step_between_runs_keeps_the_counters_after_it(tmp_path):
    """A setup with many page faults between the first command's last run and the second's
    first: counted into no run (the counters opened ahead closed before it)."""
    setup = f"{sys.executable} -c pass"
    _, plain = _bench(tmp_path, "--runs", "3", "sleep 0.2")
    opens, exported = _bench(
        tmp_path, "--runs", "3", "--order", "sequential", "--setup", setup, "sleep 0.2", "sleep 0.2"
    )
    own = max(plain["results"][0]["counters"]["page_faults"])
    for result in exported["results"]:
        faults = result["counters"]["page_faults"]
        assert max(faults) < 3 * own, (faults, own)  # an interpreter's start-up faults far more
    assert any(entry["children"] for entry in opens), opens  # opened ahead between the commands' own runs
