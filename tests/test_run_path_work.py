"""The work a run does once per host instead of once per run, and the bytes that must not change.

Each saving here keeps what a run reports: an event's line is byte for byte what
``json.dumps`` of its fields gives (rendered lossily), a memory-backed stream ends holding the
same lines, the environment and the ``command`` object follow their inputs, and a tree gone
before its figures are read has them read once (one that outlived its root, twice).
"""

from __future__ import annotations

import hashlib
import json
import os

from hypothesis import given, settings
from hypothesis import strategies as st

from processkit.benchmark import driver
from processkit.containment import base
from processkit.engine import environment
from processkit.events import argv as argv_module
from processkit.events.emitter import Emitter
from processkit.events.types import CleanupFinished, RootExited, RunStarted
from processkit.spec import EnvPlan


def reference_line(record: dict) -> bytes:
    """An event's line as the emitter wrote it before: json.dumps, then the lossy rendering."""
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace").encode("utf-8") + b"\n"


# Any character, and the lone surrogates that stand for undecodable OS bytes (a path's).
texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)) | st.sampled_from("\udc80\udcff"), max_size=12)
STAMP = "2026-01-01T00:00:00.000Z"
values = st.one_of(st.none(), st.booleans(), st.integers(), texts)


@settings(max_examples=200, deadline=None)
@given(run_id=texts, cwd=texts, pid=st.integers(min_value=0), code=values, labels=st.dictionaries(texts, texts))
def test_an_event_line_is_the_reference_bytes(tmp_path_factory, run_id, cwd, pid, code, labels):
    path = tmp_path_factory.mktemp("stream") / "events.jsonl"
    events = [
        RunStarted(run_id=run_id, labels=labels, root_pid=pid, mechanism="cgroup_v2", cwd=cwd, time=STAMP),
        RootExited(outcome="exited", code=code, signal=None, time=STAMP),
        CleanupFinished(remaining=0, remaining_pids=[pid], shutdown={"k": code}, extra={"later": run_id}, time=STAMP),
    ]
    emitter = Emitter(str(path))
    for event in events:
        emitter.emit(event)
    emitter.close()
    written = path.read_bytes().splitlines(keepends=True)
    assert written == [reference_line(event.to_json()) for event in events]
    assert [json.loads(line)["event"] for line in written] == ["run_started", "root_exited", "cleanup_finished"]


def test_a_memory_backed_stream_holds_the_same_lines_once_closed(tmp_path):
    path = tmp_path / "events.jsonl"
    held = os.memfd_create("events.jsonl")
    by_path, by_fd = Emitter(str(path), ("runner_exit",)), Emitter("unused", ("runner_exit",), os.dup(held))
    for emitter in (by_path, by_fd):
        emitter.emit(RootExited(outcome="exited", code=0, signal=None, time=STAMP))
    assert os.fstat(held).st_size == 0  # gathered: nobody can read a memfd the batch holds
    for emitter in (by_path, by_fd):
        emitter.close()
    assert os.pread(held, 1 << 16, 0) == path.read_bytes() != b""
    os.close(held)


def test_the_inherited_environment_follows_os_environ(monkeypatch):
    plan = EnvPlan()
    first = environment.build_environment(plan, "run-1")
    assert first == dict(os.environ)
    monkeypatch.setenv("PROCESSKIT_TEST_KEPT", "one")
    assert environment.build_environment(plan, "run-1")["PROCESSKIT_TEST_KEPT"] == "one"
    monkeypatch.setenv("PROCESSKIT_TEST_KEPT", "two")
    second = environment.build_environment(plan, "run-1")
    assert second["PROCESSKIT_TEST_KEPT"] == "two"
    second["PROCESSKIT_TEST_KEPT"] = "changed by its run"  # each run's copy is its own
    monkeypatch.delenv("PROCESSKIT_TEST_KEPT")
    assert "PROCESSKIT_TEST_KEPT" not in environment.build_environment(plan, "run-1")


def test_the_command_object_follows_each_argv():
    for argv in [("true",), ("false", "x"), ("true",), ("a\udc80",), ("true",)]:
        command = argv_module.command_object(argv, raw=True)
        expected = hashlib.sha256(b"\0".join(os.fsencode(arg) for arg in argv)).hexdigest()
        assert command["argv_sha256"] == expected
        assert command["argv"] == [argv_module.render(arg) for arg in argv]


def count_usage_reads(monkeypatch) -> list:
    calls: list = []
    real = base.Container.usage

    def counted(self, *given):
        calls.append(self)
        return real(self, *given)

    monkeypatch.setattr(base.Container, "usage", counted)
    return calls


def test_a_tree_gone_before_its_figures_has_them_read_once(monkeypatch):
    calls = count_usage_reads(monkeypatch)
    measured = driver.measure(("true",))
    assert measured.exit_code == 0 and len(calls) == 1


def test_a_tree_that_outlived_its_root_has_its_figures_read_again(monkeypatch):
    calls = count_usage_reads(monkeypatch)
    measured = driver.measure(("sh", "-c", "sleep 30 & exit 0"))
    assert measured.exit_code == 0 and len(calls) == 2


def test_each_job_of_a_batch_gets_its_own_environment_and_program(tmp_path, spawn_backend):
    """One host spawns every job, passing again what it encoded for the job before only when
    the job's environment (order included), argv and PATH are the same."""
    import json

    from conftest import run_cli

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "cat").symlink_to("/bin/echo")  # on the second job's PATH, "cat" is another program
    show = ["cat", "/proc/self/environ"]
    jobs = [
        {"args": show, "id": "a", "env": {"MODE": "a"}},
        {"args": show, "id": "b", "env": {"MODE": "b", "PATH": f"{bin_dir}:/usr/bin:/bin"}},
        {"args": show, "id": "c", "env": {"MODE": "c"}},
        {"args": show, "id": "d", "env": {"MODE": "c"}},
        {"args": [*show, "/dev/null"], "id": "e", "env": {"MODE": "c"}},
    ]
    for job in jobs:
        job["env_clear"] = True
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    out = tmp_path / "out"
    proc = run_cli("batch", manifest, "--out", out, "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    captured = {job["id"]: (out / job["id"] / "capture" / "stdout.log").read_bytes() for job in jobs}
    assert captured == {
        "a": b"MODE=a\0",
        "b": b"/proc/self/environ\n",
        "c": b"MODE=c\0",
        "d": b"MODE=c\0",
        "e": b"MODE=c\0",
    }
