"""The launcher forks ``bench``'s perf helper before it runs ``bench``'s modules (issue 49).

The helper (``benchmark/perf_switch.py``) waits out the kernel's grace period for the per-task
perf switch, 7-37 ms, beside the start-up; whatever of it is left when the session is set up is
on the benchmark's wall time. Forked from ``cli/bench.py``'s ``main``, it started after the
bundle's ~110 modules had run; the launcher's finder (``cli/quickimport.py``'s ``install``) now
forks it once the bundle is read, before they run. The test runs the installed launcher's own
code with ``os.fork`` logging the modules loaded at each fork, and checks that the helper is
still collected and counted once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

LAUNCHER = Path(sys.executable).parent / "processkit-cli"

LOGGED = textwrap.dedent(
    """
    import json, os, sys
    log, launcher = sys.argv[1], sys.argv[2]
    real, main_pid = os.fork, os.getpid()

    def fork():
        loaded = sorted(name for name in sys.modules if name.startswith("processkit."))
        pid = real()
        if pid > 0 and os.getpid() == main_pid:
            with open(log, "a") as handle:
                handle.write(json.dumps({"pid": pid, "loaded": loaded}) + "\\n")
        return pid

    os.fork = fork
    sys.argv = [launcher, *sys.argv[3:]]
    with open(launcher) as handle:
        code = compile(handle.read(), launcher, "exec")
    exec(code, {"__name__": "__main__"})
    """
)


def _forks(tmp_path, *args: str) -> list[dict]:
    """The forks the launcher's process made for ``processkit-cli ARGS``, each with the modules
    loaded then."""
    log = tmp_path / "forks.jsonl"
    log.touch()
    argv = [sys.executable, "-c", LOGGED, str(log), str(LAUNCHER), *args]
    done = subprocess.run(argv, cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_the_helper_is_forked_before_benchs_modules_run(tmp_path):
    out = tmp_path / "bench.json"
    forks = _forks(tmp_path, "bench", "-N", "--runs", "1", "--style", "none", "--export-json", str(out), "true")
    assert len(forks) == 1, forks  # the helper, once (the runs are the engine's clones, not forks)
    loaded = set(forks[0]["loaded"])
    assert "processkit.benchmark.perf_switch" in loaded, loaded
    assert not {"processkit.cli.main", "processkit.cli.bench", "processkit.benchmark.session"} & loaded, loaded
    assert len(json.loads(out.read_text())["results"][0]["times"]) == 1  # the benchmark ran as before


def test_a_run_forks_no_helper(tmp_path):
    assert _forks(tmp_path, "run", "--jsonl", str(tmp_path / "events.jsonl"), "--", "true") == []


def test_the_launcher_names_no_commands_helper_it_runs_the_commands_start_step(tmp_path):
    """The launcher calls ``cli/<command>_start.py``'s ``start`` where a command has one (``bench``'s
    forks the helper): it names no subcommand's helper itself, and a command without such a
    step (``run``) imports none."""
    from processkit.cli import quickimport

    source = Path(quickimport.__file__).read_text()
    assert "perf_switch" not in source and '"bench"' not in source.partition("def install")[2]
    forks = _forks(tmp_path, "bench", "-N", "--runs", "1", "--style", "none", "true")
    assert "processkit.cli.bench_start" in forks[0]["loaded"]


def test_the_commands_with_a_start_step_are_those_with_a_start_module():
    """The launcher runs ``cli/<command>_start.py`` for the commands ``STARTED_COMMANDS`` names (decided by that
    list and the source, never by a bundle's rows): a step added or removed changes both."""
    from processkit.cli import quickimport

    here = Path(quickimport.__file__).parent
    assert sorted(quickimport.STARTED_COMMANDS) == sorted(
        path.name[: -len("_start.py")] for path in here.glob("*_start.py")
    )
    assert set(quickimport.STARTED_COMMANDS) <= set(quickimport.BUNDLED_COMMANDS)
