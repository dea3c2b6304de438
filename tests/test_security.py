"""Security properties (docs/control-plane.md §5): the trust boundary is the OS user. Another user
cannot reach a run's control socket or read its registry; nothing planted in the registry or in
place of a socket directory is followed; argv stays out of everything but an --argv-raw JSONL;
and human output cannot be steered by escape sequences the child or a stream controls.

The permission modes themselves (registry 0700, socket 0600 in a 0700 directory) are asserted
in test_registry.py and test_control.py.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import unicodedata

import pytest

from conftest import SAFETY_NET, run_cli, start_cli, wait_for_event, wait_for_file
from control_support import registry_record
from streams import check_stream, one

NOBODY = ["--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def as_other_user(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["setpriv", *NOBODY, *argv], capture_output=True, stdin=subprocess.DEVNULL, timeout=SAFETY_NET
    )


@pytest.fixture(scope="module")
def other_user_python() -> str:
    """An interpreter the unprivileged user ``nobody`` can run, through setpriv."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to act as another user")
    for candidate in (sys.executable, "/usr/bin/python3"):
        if as_other_user([candidate, "-c", "import os; print(os.getuid())"]).stdout.strip() not in (b"", b"0"):
            return candidate
    pytest.skip("no interpreter that the user nobody can run")


@pytest.fixture
def shared_registry(monkeypatch):
    """A registry inside a world-readable directory, so only the registry's own mode protects
    it (the test's tmp dir is private, which would hide a widened registry)."""
    base = tempfile.mkdtemp(prefix="pk-open-")
    os.chmod(base, 0o755)
    registry = os.path.join(base, "runs")
    monkeypatch.setenv("PROCESSKIT_CLI_REGISTRY_DIR", registry)
    yield registry
    shutil.rmtree(base)


def live_run(tmp_path, *args, run_id: str = "guarded", command=("sleep", "30")):
    """A run whose child is up; returns (runner, jsonl)."""
    jsonl = tmp_path / f"{run_id}.jsonl"
    runner = start_cli("run", "--jsonl", jsonl, "--run-id", run_id, *args, "--", *command)
    wait_for_event(jsonl, "members_snapshot")
    return runner, jsonl


def end_run(runner, run_id: str) -> None:
    assert run_cli("cancel", "--run-id", run_id).returncode == 0
    runner.communicate(timeout=SAFETY_NET)


# -- another user -------------------------------------------------------------------------------
ATTEMPTS = """
import os, socket, sys
endpoint, registry = sys.argv[1], sys.argv[2]
results = []
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    sock.connect(endpoint)
    results.append("connected")
except OSError as exc:
    results.append(exc.__class__.__name__)
for attempt in (lambda: os.listdir(registry), lambda: open(os.path.join(registry, sys.argv[3])).read()):
    try:
        attempt()
        results.append("read")
    except OSError as exc:
        results.append(exc.__class__.__name__)
print(" ".join(results))
"""


def test_another_user_can_neither_connect_nor_list(tmp_path, shared_registry, other_user_python):
    runner, _ = live_run(tmp_path)
    try:
        record = next(name for name in os.listdir(shared_registry) if name.endswith(".json"))
        endpoint = json.loads(run_cli("list", "--json").stdout)["endpoint"]
        attempt = as_other_user([other_user_python, "-c", ATTEMPTS, endpoint, shared_registry, record])
        assert attempt.stdout.split() == [b"PermissionError"] * 3, attempt.stderr
        assert json.loads(run_cli("inspect", "--run-id", "guarded", "--json").stdout)["run_id"] == "guarded"
    finally:
        end_run(runner, "guarded")


# -- nothing planted is followed --------------------------------------------------------------
def plant_record(registry, stem: str, run_id: str, endpoint: str | None = None) -> None:
    record = registry_record(run_id, f"{stem}.lock", endpoint=endpoint)
    os.makedirs(registry, mode=0o700, exist_ok=True)
    with open(os.path.join(registry, f"{stem}.json"), "w") as handle:
        json.dump(record, handle)


def test_a_symlink_planted_as_a_lock_file_is_never_followed(tmp_path, isolated_registry):
    """A record's lock and an orphaned lock that point at a file elsewhere: neither is probed
    through the link, locked or deleted; both are unprobed (the reference's tally) and kept."""
    victim = tmp_path / "victim"
    victim.write_text("precious")
    plant_record(isolated_registry, "run-a", "linked")
    os.symlink(victim, isolated_registry / "run-a.lock")
    os.symlink(victim, isolated_registry / "run-b.lock")
    os.utime(isolated_registry / "run-b.lock", (0, 0), follow_symlinks=False)  # old enough to be an orphan
    assert [json.loads(line)["health"] for line in run_cli("list", "--json").stdout.splitlines()] == ["unprobed"]
    tally = json.loads(run_cli("prune", "--json").stdout)
    assert tally == {"pruned": 0, "live": 0, "unprobed": 2, "orphaned_locks": 0}
    assert sorted(os.listdir(isolated_registry)) == ["run-a.json", "run-a.lock", "run-b.lock"]
    assert victim.read_text() == "precious"


def test_prune_never_follows_a_link_in_place_of_a_socket_directory(tmp_path, isolated_registry):
    """A stale record naming ``/tmp/pkc-*/c.sock`` where the directory is a link to someone
    else's: the record goes, the socket the link leads to stays."""
    victim_dir = tmp_path / "victim"
    victim_dir.mkdir()
    victim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    victim.bind(str(victim_dir / "c.sock"))
    link = f"/tmp/pkc-planted-{os.getpid()}"  # exactly the shape prune may reap
    os.symlink(victim_dir, link)
    try:
        plant_record(isolated_registry, "run-s", "planted", f"{link}/c.sock")
        (isolated_registry / "run-s.lock").write_text("")  # nobody holds it: stale
        assert json.loads(run_cli("prune", "--json").stdout)["pruned"] == 1
        assert os.listdir(isolated_registry) == []
        assert os.listdir(victim_dir) == ["c.sock"]
    finally:
        victim.close()
        os.unlink(link)


# -- argv secrets -------------------------------------------------------------------------------
SECRET = "hunter2-token-9f8e7d"


@pytest.mark.parametrize("raw", [False, True], ids=["redacted", "argv_raw"])
def test_argv_secrets_stay_out_of_everything_but_a_raw_jsonl(tmp_path, isolated_registry, raw):
    """Every place a run is described: the registry files, list and inspect (human and JSON),
    the JSONL and its rendering. Only --argv-raw puts the argv in the JSONL, and only there."""
    runner, jsonl = live_run(tmp_path, *(["--argv-raw"] if raw else []), command=("sh", "-c", "sleep 30", SECRET))
    try:
        described = [(isolated_registry / name).read_bytes() for name in os.listdir(isolated_registry)]
        for args in (
            ["list"],
            ["list", "--json"],
            ["inspect", "--run-id", "guarded"],
            ["inspect", "--run-id", "guarded", "--json"],
        ):
            described.append(run_cli(*args).stdout)
    finally:
        end_run(runner, "guarded")
    check_stream(jsonl, 108)
    if not raw:
        described.append(run_cli("events", "--file", jsonl).stdout)
    assert not [text for text in described if SECRET.encode() in text]
    assert (SECRET.encode() in jsonl.read_bytes()) == raw


# -- terminal safety ------------------------------------------------------------------------------
HOSTILE = "\x1b]0;owned\x07\x1b[2J\u202e"
PROCESS_NAME = "\x1b]0;x\x07\x1b[2J\u202e"  # 13 bytes: fits a comm (15) whole


def assert_terminal_safe(output: bytes) -> None:
    """Independently of the code under test: no control character but the newline, and no
    Unicode format character (bidi overrides and the like)."""
    text = output.decode("utf-8")
    unsafe = [ch for ch in text if ch != "\n" and unicodedata.category(ch) in ("Cc", "Cf")]
    assert not unsafe, f"terminal-unsafe characters {unsafe!r} in {text!r}"


NAME_ITSELF = f"""
import ctypes, sys, time
ctypes.CDLL(None).prctl(15, {PROCESS_NAME.encode()!r}, 0, 0, 0)  # PR_SET_NAME: the comm /proc shows
open(sys.argv[1], "w").close()
time.sleep(30)
"""


def test_a_child_chosen_process_name_cannot_reach_the_terminal(tmp_path):
    """The name comes from the child twice: set with PR_SET_NAME at run time (inspect), and as
    the name of the program it was started as, a symlink (the spawn snapshot, then events)."""
    program = tmp_path / HOSTILE
    program.symlink_to(sys.executable)
    ready = tmp_path / "ready"
    runner, jsonl = live_run(tmp_path, command=(str(program), "-c", NAME_ITSELF, str(ready)))
    try:
        wait_for_file(ready)
        snapshot = json.loads(run_cli("inspect", "--run-id", "guarded", "--json").stdout)
        assert [m["name"] for m in snapshot["members"]] == [PROCESS_NAME]
        assert_terminal_safe(run_cli("inspect", "--run-id", "guarded").stdout)
    finally:
        end_run(runner, "guarded")
    spawned = one(check_stream(jsonl, 108), "members_snapshot")["members"][0]["name"]
    assert "\x1b" in spawned
    assert_terminal_safe(run_cli("events", "--file", jsonl).stdout)


def test_hostile_paths_cannot_reach_the_terminal_through_list_or_inspect(tmp_path):
    """Paths are the one registry field the run's caller chooses freely (run ids and labels are
    validated on the way in): list and inspect show them sanitized, --json keeps them exact."""
    hostile = tmp_path / HOSTILE
    hostile.mkdir()
    runner, jsonl = live_run(hostile, "--capture-dir", hostile / "cap")
    try:
        listed = json.loads(run_cli("list", "--json").stdout)
        assert listed["jsonl"] == str(jsonl) and listed["capture_dir"] == str(hostile / "cap")
        for args in (["list"], ["inspect", "--run-id", "guarded"], ["inspect", "--all"]):
            assert_terminal_safe(run_cli(*args).stdout)
    finally:
        end_run(runner, "guarded")


def test_a_stream_with_escapes_in_ids_labels_and_names_renders_safely(tmp_path):
    """The stream is untrusted input: a run id, a label and a member name full of escapes
    (schema-valid or not) are rendered without them."""
    stream = [
        {
            "schema_version": 1,
            "time": "2026-07-20T21:00:00.000Z",
            "event": "run_started",
            "run_id": HOSTILE,
            "labels": {"k": HOSTILE, HOSTILE: "v"},
            "root_pid": 7,
            "mechanism": "cgroup_v2",
            "abrupt_cleanup": "direct_child_only",
            "cwd": HOSTILE,
            "command": {"redacted": False, "argv": [HOSTILE], "argv_sha256": "0" * 64, "hint": None},
        },
        {
            "schema_version": 1,
            "time": "2026-07-20T21:00:00.001Z",
            "event": "members_snapshot",
            "reason": "spawn",
            "read_error": False,
            "members": [{"pid": 7, "ppid": 1, "name": HOSTILE, "start_time": HOSTILE}],
        },
        {
            "schema_version": 1,
            "time": "2026-07-20T21:00:00.002Z",
            "event": "runner_exit",
            "code": 0,
            "source": HOSTILE,
            "child_code": 0,
        },
    ]
    path = tmp_path / "hostile.jsonl"
    path.write_text("".join(json.dumps(event) + "\n" for event in stream))
    rendered = run_cli("events", "--file", path)
    assert rendered.returncode == 0 and len(rendered.stdout.splitlines()) == 3
    assert_terminal_safe(rendered.stdout)
    assert_terminal_safe(run_cli("events", "--validate", "--file", path).stdout)


@pytest.mark.parametrize(
    "args, code",
    [
        (["run", "--timeout", HOSTILE + "\nprocesskit-cli: forged", "--jsonl", "{tmp}/run.jsonl", "--", "true"], 100),
        (["run", "--env-file", "{tmp}/" + HOSTILE, "--jsonl", "{tmp}/run.jsonl", "--", "true"], 111),
        (["list", "--health", HOSTILE], 100),
        ([HOSTILE], 100),
    ],
    ids=["bad-value", "unreadable-path", "bad-choice", "unknown-subcommand"],
)
def test_failure_lines_show_hostile_input_escaped(tmp_path, args, code):
    """A value quoted back in an error is shown with its escapes spelled out, so it can neither
    drive the terminal nor forge a line of its own."""
    proc = run_cli(*[arg.replace("{tmp}", str(tmp_path)) for arg in args])
    assert proc.returncode == code
    assert_terminal_safe(proc.stderr)
    lines = proc.stderr.decode().splitlines()
    assert lines[0].startswith("processkit-cli: ") and "\\x1b" in lines[0]
    assert all(line.startswith("usage: ") for line in lines[1:])


DUPLICATED = '{"results": [{"command": "true", "times": [0.001, 0.001], "times": [500.0, 500.0]}]}'


def test_an_export_naming_a_key_twice_is_refused_as_a_baseline_and_as_a_page(tmp_path):
    """Which of two ``times`` a reader keeps is its parser's choice ("last wins" in Python's),
    so the same file could pass one gate and fail another: a duplicate key is a malformed export
    (114 naming the key), for ``bench --baseline`` and ``report`` alike."""
    export = tmp_path / "dup.json"
    export.write_text(DUPLICATED)
    for args in (
        ["bench", "--runs", "2", "--baseline", export, "--", "true"],
        ["report", export, "-o", tmp_path / "page.html"],
    ):
        done = run_cli(*args)
        assert done.returncode == 114, (args, done.stderr)
        assert b"the key 'times' is given twice" in done.stderr, done.stderr
    export.write_text(DUPLICATED.replace('"times": [500.0, 500.0]', '"mean": 0.001'))
    assert run_cli("report", export, "-o", tmp_path / "page.html").returncode == 0
