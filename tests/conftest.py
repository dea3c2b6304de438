"""Shared fixtures: every test drives the real ``processkit-cli`` as a separate process."""

from __future__ import annotations

import compileall
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# The suite runs on busy 2-core machines (CI's runs the tests' own children beside them): a draw
# that takes long or an example past hypothesis's 200 ms deadline is the machine's load, not a
# fault, so neither fails a test here; what an example shows is checked as before.
LOADED_MACHINE_HEALTH = [HealthCheck.too_slow]
settings.register_profile("loaded", deadline=None, suppress_health_check=LOADED_MACHINE_HEALTH)
settings.load_profile("loaded")

# leak_check: the session fails naming any cgroup its runners left; run_groups: a runner's groups
# are found by its pid and the time its token names, since the test began (each module says why).
pytest_plugins = ["run_groups", "leak_check"]

# The reference's published schemas: ../shared beside the checkout, or where
# PROCESSKIT_REFERENCE_SCHEMAS points.
REFERENCE_SCHEMAS = Path(
    os.environ.get("PROCESSKIT_REFERENCE_SCHEMAS")
    or Path(__file__).resolve().parents[2] / "shared" / "reference" / "schemas"
)


def reference_schemas_present() -> bool:
    """Whether the reference schemas can be checked against. Absent on a plain clone, a test
    that needs them skips; absent in CI (``CI=true``), it fails: conformance is never skipped
    quietly where it is meant to be proven."""
    if (REFERENCE_SCHEMAS / "events-v1.schema.json").is_file():
        return True
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true, but the reference schemas are missing at {REFERENCE_SCHEMAS}")
    return False


def require_reference_schemas() -> Path:
    """The reference schema directory; skips the test (or fails it in CI) when it is absent."""
    if not reference_schemas_present():
        pytest.skip("the reference schemas are not beside the repository")
    return REFERENCE_SCHEMAS


def pytest_sessionstart(session) -> None:
    """Compile the package's bytecode once. With ``PYTHONDONTWRITEBYTECODE=1`` (set on some
    machines) an editable checkout keeps none, so each of the thousands of ``processkit-cli``
    starts below would compile every module it imports from source; an installed wheel ships its
    bytecode, and what a user starts is what is tested. Read-only locations are left as they are."""
    import processkit

    # A stop signal ignored when the runner starts stays ignored (the convention nohup relies
    # on), and an ignored disposition passes to every child: under ``nohup pytest`` (SIGHUP) or
    # a shell's background job (SIGINT, SIGQUIT) the tests of their handling would see them
    # ignored. The tests that want one ignored set it themselves.
    for signum in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM):
        if signal.getsignal(signum) == signal.SIG_IGN:
            signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)
    compileall.compile_dir(os.path.dirname(processkit.__file__), quiet=2)


def cli_without_native() -> list[str]:
    """The CLI as an install built without a C compiler runs it (``processkit._native`` missing),
    with no ``PROCESSKIT_PUMP`` the suite may run under (``native`` would refuse it, rightly)."""
    shim = "import sys; sys.modules['processkit._native'] = None; from processkit.cli.main import entry; entry()"
    return ["env", "-u", "PROCESSKIT_PUMP", sys.executable, "-c", shim]


def cli_command() -> list[str]:
    """The installed console script beside this interpreter (a version manager's shim on PATH
    would add its own start-up to every run), else ``python -m processkit``."""
    beside = Path(sys.executable).parent / "processkit-cli"
    if beside.exists():
        return [str(beside)]
    exe = shutil.which("processkit-cli")
    return [exe] if exe else [sys.executable, "-m", "processkit"]


@pytest.fixture(autouse=True)
def isolated_registry(tmp_path_factory, monkeypatch):
    """Each test gets its own registry directory, so runs never see each other."""
    registry = tmp_path_factory.mktemp("registry")
    monkeypatch.setenv("PROCESSKIT_CLI_REGISTRY_DIR", str(registry))
    return registry


def registry_entries(registry) -> list[str]:
    """The registry's records and locks, what a run must remove at its end; an ended run's
    outcome (``*.ended``, tests/test_wait_ended.py) and an ended batch's (``*.outcomes``) stay
    there on purpose."""
    if not os.path.isdir(registry):
        return []
    return sorted(name for name in os.listdir(registry) if not name.endswith((".ended", ".outcomes")))


def _select_backend(request, monkeypatch, variable: str) -> str:
    """Pins one implementation through ``variable``; the native one needs the C module."""
    if request.param == "native":
        try:
            import processkit._native  # noqa: F401
        except ImportError:
            pytest.skip("the native module is not built")
    monkeypatch.setenv(variable, request.param)
    return request.param


@pytest.fixture(params=["native", "python"])
def pump_backend(request, monkeypatch):
    """Runs a test once per pump implementation (PROCESSKIT_PUMP)."""
    return _select_backend(request, monkeypatch, "PROCESSKIT_PUMP")


@pytest.fixture(params=["native", "python"])
def spawn_backend(request, monkeypatch):
    """Runs a test once per spawn path (PROCESSKIT_SPAWN)."""
    return _select_backend(request, monkeypatch, "PROCESSKIT_SPAWN")


@pytest.fixture(params=["cgroup_v2", "process_group"])
def containment(request, monkeypatch):
    """Runs a test once per containment mechanism (PROCESSKIT_CONTAINMENT forces the fallback).

    Where the host cannot give a run a cgroup, ``streams.require_mechanism`` skips the first.
    """
    if request.param == "process_group":
        monkeypatch.setenv("PROCESSKIT_CONTAINMENT", "process_group")
    else:
        monkeypatch.delenv("PROCESSKIT_CONTAINMENT", raising=False)
    return request.param


@pytest.fixture
def small_tmpfs(tmp_path):
    """Mounts tmpfs file systems under the test's directory (root only; skips elsewhere)."""
    mounted = []

    def mount(name: str, options: str):
        target = tmp_path / name
        target.mkdir()
        if shutil.which("mount") is None:
            pytest.skip("no mount command")
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)], capture_output=True)
        if result.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {result.stderr.decode(errors='replace').strip()}")
        mounted.append(target)
        return target

    yield mount
    for target in reversed(mounted):
        subprocess.run(["umount", str(target)], check=True)


# How long a test waits for what it expects to come (a process's end, an event, a file): only a
# safety net, far past what a right run takes on a loaded 2-core host, so reaching it is a failure.
SAFETY_NET = 60.0

# A child (``python3 -c UNTIL_RELEASED FILE``) that lives until the test makes FILE, then exits 0;
# never released within ``SAFETY_NET`` (a test that failed before it), it exits 1 on its own.
UNTIL_RELEASED = (
    f"import os, sys, time\nend = time.monotonic() + {SAFETY_NET}\nwhile not os.path.exists(sys.argv[1]):\n"
    "    time.sleep(0.01)\n    if time.monotonic() > end: sys.exit('never released')\n"
)


def run_cli(
    *args, timeout: float = SAFETY_NET, patched: tuple[str, ...] | None = None, **kwargs
) -> subprocess.CompletedProcess:
    """Run ``processkit-cli ARGS`` to completion, capturing bytes; ``patched``: run by ``patched_cli``."""
    kwargs.setdefault("stdin", subprocess.DEVNULL)
    command = cli_command() if patched is None else patched_cli(*patched)
    return subprocess.run(command + [str(a) for a in args], capture_output=True, timeout=timeout, **kwargs)


def start_cli(*args, patched: tuple[str, ...] | None = None, **kwargs) -> subprocess.Popen:
    """``processkit-cli ARGS`` started, its pipes ours; ``patched``: run by ``patched_cli``."""
    kwargs.setdefault("stdin", subprocess.DEVNULL)
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    command = cli_command() if patched is None else patched_cli(*patched)
    return subprocess.Popen(command + [str(a) for a in args], **kwargs)


# Runs the CLI with each ``processkit.engine.<module>.<name>`` (or ``<module>.<name>``, a module
# named from ``processkit.`` on) set to a Python expression first: triples up to "--".
PATCHED_MAIN = """
import importlib, sys
args = sys.argv[1:]
while args[0] != "--":
    module, name, value, args = *args[:3], args[3:]
    module = module if module.startswith("processkit.") else "processkit.engine." + module
    setattr(importlib.import_module(module), name, eval(value))
from processkit.cli.main import main
raise SystemExit(main(args[1:]))
"""


# ``patched``: the bound a descendant holding an exited root's pipes is read for (``race``), shortened.
SHORT_EXIT_DRAIN = ("race", "EXIT_DRAIN_SECONDS", "0.5")


def full_pipe() -> tuple[int, int]:
    """A pipe (read end, write end) filled until a write would block; the write end blocking
    again, so a process given it blocks at its first write until the read end is read."""
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    os.set_blocking(write_end, False)
    try:
        while True:
            os.write(write_end, b"x" * 65536)
    except BlockingIOError:
        pass
    os.set_blocking(write_end, True)
    return read_end, write_end


def patched_cli(module: str, name: str, value: str, *more: str) -> list[str]:
    """The command of a CLI whose ``processkit.engine.<module>.<name>`` (``<module>.<name>`` for a
    ``module`` named from ``processkit.`` on) is ``value`` (a Python expression), and so for each
    further triple in ``more``: a bound a test would otherwise wait out (tests/test_faults.py
    injects faults so)."""
    return [sys.executable, "-c", PATCHED_MAIN, module, name, value, *more, "--"]


@contextlib.contextmanager
def reaped(proc: subprocess.Popen):
    """``proc`` killed on the way out if it is still running then (a failed assertion), and
    waited for, its pipes read and closed: nothing a test started outlives it."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def ended_after(process: subprocess.Popen, timeout: float = SAFETY_NET) -> tuple[float, bytes]:
    """The seconds from now until ``process`` ends (its pipes read meanwhile), and its stderr."""
    began = time.monotonic()
    _, err = process.communicate(timeout=timeout)
    return time.monotonic() - began, err


def read_events(path) -> list[dict]:
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def event_names(path) -> list[str]:
    return [e["event"] for e in read_events(path)]


def wait_for_event(path, name: str, timeout: float = SAFETY_NET) -> dict:
    """Synchronise on the JSONL: return the first ``name`` event once it has been written."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for event in read_events_tolerant(path):
            if event["event"] == name:
                return event
        time.sleep(0.01)
    raise AssertionError(f"no {name} event in {path} within {timeout}s: {read_events_tolerant(path)}")


def wait_for_file(path, timeout: float = SAFETY_NET) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear within {timeout}s")
        time.sleep(0.01)


def listed_when(ready, timeout: float = SAFETY_NET) -> dict[str, dict]:
    """``list --json`` by run id, once ``ready`` holds of it (a late publication comes in its own time)."""
    deadline = time.monotonic() + timeout
    while True:
        proc = run_cli("list", "--json")
        assert proc.returncode == 0, proc.stderr
        runs = {run["run_id"]: run for run in map(json.loads, proc.stdout.splitlines())}
        if ready(runs):
            return runs
        assert time.monotonic() < deadline, f"not listed as expected within {timeout}s: {sorted(runs)}"
        time.sleep(0.02)


# The product publishes a run nobody can follow spec.LATE_PUBLICATION_MS after its spawn, 50 ms: a
# loaded machine may hold even `true` up that long, so the tests of it set the wait through the
# product's knob (``late_publication``) to a time a quick child surely ends within.
TEST_LATE_PUBLICATION_MS = 1500


@pytest.fixture
def late_publication(monkeypatch) -> float:
    """Sets ``PROCESSKIT_LATE_PUBLICATION_MS`` for the runs this test starts; returns how late
    (seconds after its start) such a run's record is written at the least. A late record is written
    that long after the spawn's turn began, which may be some ms before the spawn itself (39 ms at
    a load of 12), and a file's mtime comes from the kernel's coarse clock (up to a tick behind):
    half the wait, while a record stamped with its publication's time instead would show ~0."""
    monkeypatch.setenv("PROCESSKIT_LATE_PUBLICATION_MS", str(TEST_LATE_PUBLICATION_MS))
    return TEST_LATE_PUBLICATION_MS / 1000 / 2


def published_late_by(record_path: str) -> float:
    """Seconds from the run's ``started_at`` in its registry record to the record's writing."""
    import datetime

    with open(record_path) as handle:
        started = datetime.datetime.fromisoformat(json.load(handle)["started_at"]).timestamp()
    return os.stat(record_path).st_mtime - started


def read_events_tolerant(path) -> list[dict]:
    """Complete lines only: a reader racing the writer may see a partial last line."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    lines = raw.split(b"\n")[:-1]
    return [json.loads(line) for line in lines if line.strip()]


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or between it and the read
        return False
