"""``bench``'s ``user`` and ``system`` (the exports' ``user``/``system``/``user_times``/
``system_times``, the CSV's columns, the terminal's ``[User: …, System: …]``) carry hyperfine's
meaning: the root's rusage from its reaping, the root's and the descendants it waited for, as
hyperfine's ``getrusage(RUSAGE_CHILDREN)`` across a run. The whole tree's CPU, a process the
command left running included, is our own ``cpu_times``/``cpu``. Both sample paths (the engine's
and ``benchmark/direct.py``), both pumps, and an install without the C module."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import cli_without_native, run_cli
from processkit import native, rusage

UNIT_SECONDS = {"s": 1.0, "ms": 1e-3, "µs": 1e-6}
BURNED = 0.1  # CPU seconds the burning process uses, by its own clock

BURN = f"""{sys.executable} -c 'import time
while time.process_time() < {BURNED}:
    pass
print("burned", flush=True)
time.sleep(int(__import__("sys").argv[1]))'"""

# The burner left running: it says it has burned through a FIFO the root reads, then sleeps on
# (ended by the run's teardown); the root never waits for it.
LEAVE = f"""mkfifo "burned-$HYPERFINE_ITERATION"
{BURN} 300 > "burned-$HYPERFINE_ITERATION" &
read line < "burned-$HYPERFINE_ITERATION"
"""

WAIT = f"""{BURN} 0 > /dev/null
:
"""

PATHS = ["direct", "engine"]


def bench(tmp_path, script: str, path: str, *, cli=None, env=None) -> tuple[dict, list[dict], str]:
    (tmp_path / "cmd.sh").write_text(script)
    args = ["bench", "-N", "--style", "basic", "--runs", "2", "sh cmd.sh"]
    args += ["--export-json", tmp_path / "b.json", "--export-csv", tmp_path / "b.csv"]
    env = {**(env or {}), **({"PROCESSKIT_BENCH_PATH": path} if path == "engine" else {})}
    if cli is None:
        done = run_cli(*args, cwd=tmp_path, env={**os.environ, **env})
    else:
        done = subprocess.run(cli + [str(a) for a in args], cwd=tmp_path, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    (result,) = json.loads((tmp_path / "b.json").read_text())["results"]
    with open(tmp_path / "b.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return result, rows, done.stdout.decode()


def hyperfine_figures(result: dict) -> list[float]:
    return [user + system for user, system in zip(result["user_times"], result["system_times"])]


@pytest.mark.parametrize("path", PATHS)
def test_a_process_left_running_is_in_the_trees_cpu_not_in_user_and_system(tmp_path, pump_backend, path):
    result, rows, shown = bench(tmp_path, LEAVE, path)
    assert all(cpu < BURNED / 2 for cpu in hyperfine_figures(result)), result  # the shell's own few ms
    assert result["user"] + result["system"] < BURNED / 2, result
    (row,) = rows
    assert float(row["user"]) + float(row["system"]) < BURNED / 2, row
    assert all(cpu >= BURNED for cpu in result["cpu_times"]), result  # the burner, until the teardown
    assert result["cpu"]["min"] >= BURNED, result
    user = next(line for line in shown.splitlines() if "[User:" in line)
    figure, unit = re.search(r"\[User: ([0-9.]+) (s|ms|µs)", user).groups()  # the mean's unit, as hyperfine's
    assert float(figure) * UNIT_SECONDS[unit] < BURNED / 2, shown  # a few ms, as on the export


@pytest.mark.parametrize("path", PATHS)
def test_a_child_the_root_waited_for_is_in_both(tmp_path, pump_backend, path):
    result, _, _ = bench(tmp_path, WAIT, path)
    assert all(cpu >= BURNED for cpu in hyperfine_figures(result)), result
    assert all(cpu >= BURNED for cpu in result["cpu_times"]), result


def test_without_the_c_module_user_and_system_are_the_roots_too(tmp_path):
    result, _, _ = bench(tmp_path, LEAVE, "direct", cli=cli_without_native())
    assert all(cpu < BURNED / 2 for cpu in hyperfine_figures(result)), result
    assert all(cpu >= BURNED for cpu in result["cpu_times"]), result


@pytest.mark.parametrize("env", [{"PROCESSKIT_SPAWN": "python"}, {"PROCESSKIT_CONTAINMENT": "process_group"}])
def test_the_popen_spawns_root_and_a_process_group_runs_likewise(tmp_path, env):
    """The fallback spawn's child (``spawn_popen``) is reaped by the same ``wait4``; a run
    contained by its process group has the same root (its tree's CPU from the reaped children)."""
    result, _, _ = bench(tmp_path, LEAVE, "direct", env=env)
    assert all(cpu < BURNED / 2 for cpu in hyperfine_figures(result)), result
    assert all(cpu is None or cpu >= BURNED for cpu in result["cpu_times"]), result


@pytest.mark.parametrize("built", ["native", "fallback"])
def test_wait4_gives_the_kernels_split_of_the_reaped_child(monkeypatch, built):
    """The root's user and system as ``RUSAGE_CHILDREN`` grows by them at its reaping (to the
    microsecond each total is truncated to): the kernel's own split (a sub-tick command's too),
    through the C module's ``wait4`` and the standard library's alike."""
    if built == "fallback":
        monkeypatch.setattr(native, "module", lambda: None)
    elif native.module() is None:
        pytest.skip("the native module is not built")
    import resource

    # a child with time in both modes: the kernel's (a system call loop) and its own
    burn = "import os, time\nwhile time.process_time() < 0.05:\n    os.stat('/')\n"
    child = subprocess.Popen([sys.executable, "-c", burn])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    pid, status, _, user_ns, system_ns = rusage.wait4(child.pid, 0)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    child.returncode = 0  # reaped here
    assert (pid, status) == (child.pid, 0)
    assert abs(user_ns - round((after.ru_utime - before.ru_utime) * 1e6) * 1000) <= 1000
    assert abs(system_ns - round((after.ru_stime - before.ru_stime) * 1e6) * 1000) <= 1000
    assert user_ns + system_ns >= 50_000_000


def test_the_help_says_what_user_and_system_hold(tmp_path):
    done = run_cli("bench", "--help", cwd=tmp_path)
    said = " ".join(done.stdout.decode().split())
    assert "user and system, as on the terminal, are hyperfine's: the root's and what it waited for" in said, said
    assert "the whole tree's CPU, a process the command left running in it, is cpu" in said, said
