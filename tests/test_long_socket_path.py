"""A control socket whose path is too long for a Unix socket address (108 bytes, its NUL
included): a batch lodged in a deep ``$XDG_RUNTIME_DIR`` warned ``could not open the control
transport: File name too long`` and its jobs could be neither inspected nor cancelled. Both
sides now go through a handle on the socket's directory (processkit/control/address.py), the
listening one with the native module and without it."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

import processkit
from conftest import SAFETY_NET, cli_command, cli_without_native, listed_when, reaped, run_cli, wait_for_event
from streams import PY
from test_other_users import other_user  # noqa: F401 - the fixture

WAITER = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.01)"
CANCELLED = 108


@pytest.fixture
def deep_runtime(tmp_path, monkeypatch):
    """A private ``$XDG_RUNTIME_DIR`` whose batch sockets' paths are well past 108 bytes."""
    runtime = tmp_path / ("r" * max(1, 200 - len(str(tmp_path)) - 1))
    runtime.mkdir(mode=0o700)
    assert len(str(runtime)) >= 200
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    return runtime


@pytest.mark.parametrize("native", [True, False], ids=["native", "without-native"])
def test_a_job_whose_socket_path_is_too_long_is_inspected_and_cancelled(tmp_path, deep_runtime, native):
    release = tmp_path / "release"
    jobs = [
        {"args": [PY, "-c", WAITER, str(release)], "id": "held", "run_id": "deep-held"},
        {"args": [PY, "-c", WAITER, str(release)], "id": "victim", "run_id": "deep-victim"},
    ]
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    out = tmp_path / "out"
    command = (cli_command() if native else cli_without_native()) + [
        "batch",
        str(manifest),
        "--out",
        str(out),
        "-j",
        "2",
    ]
    batch = subprocess.Popen(
        command, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    with reaped(batch):
        for name in ("held", "victim"):
            wait_for_event(out / name / "events.jsonl", "run_started")
        runs = listed_when(lambda runs: {"deep-held", "deep-victim"} <= set(runs))
        endpoint = runs["deep-held"]["endpoint"]
        assert endpoint is not None and endpoint.startswith(f"{deep_runtime}/pkc-") and len(endpoint) > 108
        inspected = run_cli("inspect", "--run-id", "deep-held", "--json", cwd=tmp_path)
        assert inspected.returncode == 0, inspected.stderr
        assert json.loads(inspected.stdout)["run_id"] == "deep-held"
        assert processkit.attach("deep-held").inspect()["run_id"] == "deep-held"  # the API, in this process
        cancelled = run_cli("cancel", "--run-id", "deep-victim", cwd=tmp_path)
        assert cancelled.returncode == 0, cancelled.stderr
        wait_for_event(out / "victim" / "events.jsonl", "runner_exit")
        release.touch()
        _, err = batch.communicate(timeout=SAFETY_NET)
    assert b"warning" not in err, err
    codes = {
        line["id"]: line["exit_code"] for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines())
    }
    assert codes == {"held": 0, "victim": CANCELLED}
    assert [name for name in os.listdir(deep_runtime) if name.startswith("pkc-")] == []


def test_a_run_beside_a_deep_runtime_dir_is_cancelled(tmp_path, deep_runtime):
    """``run`` keeps its socket under ``/tmp`` (the reference's base), whatever ``$XDG_RUNTIME_DIR``."""
    proc = subprocess.Popen(
        cli_command() + ["run", "--run-id", "deep-run", "--jsonl", str(tmp_path / "e.jsonl"), "--", "sleep", "30"],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    with reaped(proc):
        wait_for_event(tmp_path / "e.jsonl", "run_started")
        listed_when(lambda runs: "deep-run" in runs)
        assert run_cli("inspect", "--run-id", "deep-run", cwd=tmp_path).returncode == 0
        assert run_cli("cancel", "--run-id", "deep-run", cwd=tmp_path).returncode == 0
        _, err = proc.communicate(timeout=SAFETY_NET)
    assert proc.returncode == CANCELLED, err
    assert b"warning" not in err, err


def test_a_long_socket_path_through_another_users_directory_is_refused(tmp_path, monkeypatch, other_user):
    """The short address's handle is walked as the registry's is: a deep runtime directory reached
    through a directory of another user's (their link in it) gets no socket, said in the warning,
    and the job still runs (the reference's warn and run); nothing is bound through their link."""
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    (theirs / "via").symlink_to(real)
    os.lchown(theirs / "via", other_user.pw_uid, other_user.pw_gid)
    os.chown(theirs, other_user.pw_uid, other_user.pw_gid)
    name = "r" * max(1, 200 - len(str(theirs / "via")) - 1)
    (real / name).mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(theirs / "via" / name))
    out = tmp_path / "out"
    proc = run_cli("batch", "--out", out, "--", "true", ":::", "one", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    warned = [line for line in proc.stderr.decode().splitlines() if "warning" in line]
    assert warned == [
        f"processkit-cli: warning: could not open the control transport: its path goes through {theirs}, "
        f"which belongs to uid {other_user.pw_uid}"
    ], proc.stderr
    assert os.listdir(real / name) == []
