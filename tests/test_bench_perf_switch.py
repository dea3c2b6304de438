"""``bench``'s start-up turns the kernel's per-task perf switch on in a helper process (issue 49,
``benchmark/perf_switch.py``): the session's first perf event would otherwise wait out an RCU
grace period in ``perf_event_open`` after the whole start-up, on the benchmark's wall time.

The CLI's own ``main`` is run in a process whose ``counters.perf_event_open`` logs each call's
process and result, so the helper's open (made in a fork of that process) is logged too."""

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
        entry = {"pid": os.getpid(), "fd": fd, "helpers": []}
        if os.getpid() == main_pid:  # its children still there, a zombie included
            entry["helpers"] = [pid for pid in os.listdir("/proc") if pid.isdigit() and parent(pid) == main_pid]
        with open(log, "a") as handle:
            handle.write(json.dumps(entry) + "\\n")
        return fd

    counters.perf_event_open = exit_clock.perf_event_open = logged
    sys.argv = ["processkit-cli", *sys.argv[2:]]
    from processkit.cli.main import entry

    entry()
    """
)


def test_the_first_perf_event_is_a_helpers_collected_before_the_sessions_first(tmp_path):
    log = tmp_path / "opens.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", LOGGED, str(log), "bench", "-N", "--runs", "2", "--style", "none", "true"],
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    opens = [json.loads(line) for line in log.read_text().splitlines()]
    pids = [entry["pid"] for entry in opens]
    main = [entry for entry in opens if entry["pid"] == max(set(pids), key=pids.count)]  # the session's: many opens
    if not any(entry["fd"] >= 0 for entry in main):
        pytest.skip("perf events are refused here (perf_event_paranoid, seccomp)")
    first = opens[0]
    assert first["pid"] != main[0]["pid"], opens  # the helper's open came first
    assert pids.count(first["pid"]) == 1 and len(set(pids)) == 2, opens  # one helper, one open
    assert first["fd"] >= 0, opens  # it turned the switch on: the session's opens then find it on
    assert main[0]["helpers"] == [], opens  # collected before the session's first open (no zombie)
    assert opens.index(main[0]) == 1, opens
