"""Behaviour the reference's own test suite checks through its binary, where this build had
drifted: a v1 stream the reference writes must read back as conforming here, and the notes its
tests match on keep their words. Each case drives the installed processkit-cli."""

from __future__ import annotations

import json
import os
import time

import pytest

from conftest import SAFETY_NET, read_events, run_cli, start_cli, wait_for_event
from control_support import start_waiter
from processkit.text import sanitize
from test_security import plant_record


def _captured_run(tmp_path) -> tuple:
    """A finished run with a capture, and its stream's lines."""
    jsonl = tmp_path / "events.jsonl"
    done = run_cli("run", "--jsonl", jsonl, "--capture-dir", tmp_path / "cap", "--", "sh", "-c", "echo captured")
    assert done.returncode == 0, done.stderr
    return jsonl, read_events(jsonl)


def _write(path, events) -> None:
    path.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events))


def test_a_v1_capture_without_the_seed_fields_conforms(tmp_path):
    # The reference's output_captured has no bytes_seen/bytes_written: its streams (and its
    # golden fixture) must validate here too, as the added fields are this build's extension.
    _, events = _captured_run(tmp_path)
    for event in events:
        if event["event"] == "output_captured":
            for stream in ("stdout", "stderr"):
                del event[stream]["bytes_seen"], event[stream]["bytes_written"]
    v1 = tmp_path / "v1.jsonl"
    _write(v1, events)
    checked = run_cli("events", "--file", v1, "--validate")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert b"all valid" in checked.stdout
    # Optional is not open: a field no version defines, or a seed field mistyped, still fails.
    (captured,) = (e for e in events if e["event"] == "output_captured")
    captured["stdout"]["bytes_kept"] = 1
    captured["stderr"]["bytes_written"] = "all"
    odd = tmp_path / "odd.jsonl"
    _write(odd, events)
    checked = run_cli("events", "--file", odd, "--validate")
    assert checked.returncode == 114
    assert b"/stdout/bytes_kept: property is not allowed here" in checked.stdout
    assert b"/stderr/bytes_written:" in checked.stdout


def test_a_follow_of_a_stream_cut_short_names_the_missing_terminal_event(tmp_path):
    jsonl, _ = _captured_run(tmp_path)
    lines = jsonl.read_text().splitlines(keepends=True)
    assert '"event":"runner_exit"' in lines[-1]
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:-1]))
    followed = run_cli("events", "--file", cut, "--follow")
    assert followed.returncode == 0, followed.stderr
    assert b"run_started" in followed.stdout
    assert followed.stderr.decode() == (
        "the stream ends without a terminal `runner_exit` event: no live registry record still "
        "publishes this stream, so nothing more is coming — a runner killed abruptly never gets to write its "
        "terminal event\n"
    )


def test_a_run_token_in_the_surface_is_a_flag_or_the_summary_capability():
    # The reference's grammar for `run:` (its probe tests hold it): a long flag, or the one
    # capability `run:resource-summary`. This build's own capabilities live in other namespaces.
    report = json.loads(run_cli("probe", "--json").stdout)
    odd = [t for t in report["surface"] if t.startswith("run:") and not t.startswith("run:--")]
    assert odd == ["run:resource-summary"]
    assert {"capture-keep:layout", "capture-keep:live", "paths:private"} <= set(report["surface"])


def _records(registry) -> dict:
    found = {}
    for name in registry.iterdir() if registry.is_dir() else ():
        if name.suffix == ".json":
            try:
                record = json.loads(name.read_text())
            except ValueError:  # still being written
                continue
            if record.get("endpoint"):
                found[record["run_id"]] = name
    return found


def _waited_while_live(tmp_path, registry, names, *wait_args, streams=None) -> tuple:
    """Runs ``names`` (each writing ``<name>.jsonl``), held until a waiter (``wait WAIT_ARGS
    --report-outcome``) has looked at them, a run named in ``streams`` first made to publish
    that path instead. The waiter's answer, and the seconds it took past the runs' end."""
    release = tmp_path / "release"
    held = ["sh", "-c", f"while [ ! -e {release} ]; do sleep 0.05; done"]
    runs = [start_cli("run", "--jsonl", tmp_path / f"{name}.jsonl", "--run-id", name, "--", *held) for name in names]
    deadline = time.monotonic() + 120  # a safety net: the runs' registration is the event
    while len(_records(registry)) < len(names):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    paths = _records(registry)
    for name, stream in (streams or {}).items():
        record = json.loads(paths[name].read_text())
        record["jsonl"] = str(stream)
        paths[name].write_text(json.dumps(record))
    waiter = start_waiter(*wait_args, "--report-outcome")  # asleep after its first look: it saw them live
    release.touch()
    for run in runs:
        run.communicate(timeout=SAFETY_NET)
        assert run.returncode == 0
    ended = time.monotonic()
    out, err = waiter.communicate(timeout=SAFETY_NET)
    assert waiter.returncode == 0, err
    return json.loads(out), time.monotonic() - ended


UNKNOWN = {"status": "unknown", "code": None, "source": None, "child_code": None}


def test_a_run_seen_live_whose_stream_cannot_be_read_is_unknown(tmp_path, isolated_registry):
    # wait.schema: "reported" is read from the stream the record published; a stream that cannot
    # be read is "unknown", however the run ended. Only a run that ended before the wait began
    # is answered from its tombstone (wait:ended-outcome), which here only lengthens the grace
    # for the runner_exit line (3 s): one grace for all of --all's runs, not one after another.
    garbled = tmp_path / "garbled-elsewhere.jsonl"
    garbled.write_text("not-json\n")
    names = ["garbled-1", "garbled-2", "garbled-3", "plain"]
    streams = dict.fromkeys(names[:3], garbled)
    answer, took = _waited_while_live(tmp_path, isolated_registry, names, "--all", streams=streams)
    assert answer == [{"run_id": name, **UNKNOWN} for name in names[:3]] + [
        {"run_id": "plain", "status": "reported", "code": 0, "source": "child_exit", "child_code": 0},
    ]
    # Three graces one after another take 9 s past the last look at the runs (8 s from here at the
    # least): the bound stops short of that, no nearer to one grace than a loaded host needs.
    assert took < 8.0, f"the waiter took {took:.2f} s past the runs' end (one grace is 3 s, three are 9 s)"


def test_a_stream_taken_over_by_another_run_is_not_this_runs(tmp_path, isolated_registry):
    # A reused --jsonl path holds the next run's events: its runner_exit is not this run's (the
    # reference reads a stream only when its head's run_started names the run), even though this
    # run's tombstone knows how it ended.
    other = tmp_path / "reused.jsonl"
    assert run_cli("run", "--jsonl", other, "--run-id", "next", "--", "sh", "-c", "exit 7").returncode == 7
    answer, _ = _waited_while_live(
        tmp_path, isolated_registry, ["first"], "--run-id", "first", streams={"first": other}
    )
    assert answer == {"run_id": "first", **UNKNOWN}


def test_a_runner_exit_starting_exactly_at_the_tail_window_is_read(tmp_path, isolated_registry):
    # The tail window is the stream's last 64 KiB: a line that begins exactly there is whole
    # (the byte before it is a newline) and must not be dropped as a partial first line.
    jsonl = tmp_path / "padded.jsonl"  # its runner_exit the held run's own (0): another outcome is another run's
    assert run_cli("run", "--jsonl", jsonl, "--run-id", "holder", "--", "true").returncode == 0
    *lines, last = jsonl.read_bytes().splitlines(keepends=True)
    ended = json.loads(last)
    assert ended["event"] == "runner_exit"
    ended["pad"] = ""
    ended["pad"] = "x" * (64 * 1024 - len(json.dumps(ended)) - 1)
    last = (json.dumps(ended) + "\n").encode()
    assert len(last) == 64 * 1024
    jsonl.write_bytes(b"".join(lines) + last)
    answer, _ = _waited_while_live(tmp_path, isolated_registry, ["holder"], "--all", streams={"holder": jsonl})
    assert answer == [{"run_id": "holder", "status": "reported", "code": 0, "source": "child_exit", "child_code": 0}]


def test_a_stream_that_is_no_regular_file_is_unknown_at_once(tmp_path, isolated_registry):
    # /dev/null (as a FIFO or /dev/stderr) is refused for good: no grace is waited for a line
    # that can never be read there (3 s when the run's tombstone says it ended normally).
    answer, took = _waited_while_live(
        tmp_path, isolated_registry, ["nowhere"], "--run-id", "nowhere", streams={"nowhere": "/dev/null"}
    )
    assert answer == {"run_id": "nowhere", **UNKNOWN}
    assert took < 2.5, f"the waiter took {took:.2f} s past the run's end (a grace waited is 3 s)"


def _headline(stderr: bytes) -> str:
    """The runner's own last stderr line, up to the teardown it describes."""
    return stderr.decode().splitlines()[-1].split(": ", 2)[1]


def test_the_runner_headlines_are_the_reference_words(tmp_path, isolated_registry):
    # An agent greps the stderr line for these (the reference's src/run/teardown.rs makes them):
    # each names its ending as the reference does, before the teardown's own description.
    idle = run_cli("run", "--jsonl", tmp_path / "idle.jsonl", "--idle-timeout", "200ms", "--", "sleep", "30")
    assert idle.returncode == 106
    assert _headline(idle.stderr) == "run idle-timed out after 200ms with no output"
    for verb, code, said in (
        ("cancel", 108, "run cancelled by a control-plane command"),
        ("kill", 109, "run killed by a control-plane command"),
    ):
        jsonl = tmp_path / f"{verb}.jsonl"
        run = start_cli("run", "--jsonl", jsonl, "--run-id", verb, "--", "sleep", "30")
        wait_for_event(jsonl, "run_started")
        asked = run_cli(verb, "--run-id", verb)
        assert asked.returncode == 0, asked.stderr
        _, err = run.communicate(timeout=SAFETY_NET)
        assert run.returncode == code
        assert _headline(err) == said
    assert err.decode().endswith(
        "hard-killed the whole process tree immediately via the container's kill-on-drop (no soft stop, no grace)\n"
    )


def test_a_refused_client_says_why_in_the_reference_words(isolated_registry):
    # docs/exit-codes.md of the reference prints these lines whole; the kinds were already equal.
    # Records as the reference's fixtures write them (every field, nulls spelled out).
    plant_record(isolated_registry, "gone", "gone")
    (isolated_registry / "gone.lock").write_bytes(b"")  # nobody holds it: stale
    plant_record(isolated_registry, "odd", "odd")
    (isolated_registry / "odd.lock").mkdir()  # cannot be opened: unprobed
    listed = run_cli("list", "--json")
    assert [(e["run_id"], e["health"]) for e in map(json.loads, listed.stdout.splitlines())] == [
        ("gone", "stale"),
        ("odd", "unprobed"),
    ]
    gone = run_cli("inspect", "--run-id", "gone")
    assert (gone.returncode, gone.stderr.decode()) == (
        103,
        "processkit-cli: cannot inspect run `gone`: its registry entry is stale — the runner is gone "
        "(it exited without cleaning up)\n",
    )
    odd = run_cli("cancel", "--run-id", "odd")
    assert (odd.returncode, odd.stderr.decode()) == (
        103,
        "processkit-cli: cannot cancel run `odd`: its liveness could not be probed — the entry's lock "
        "file would not open, or the lock call itself failed — so the runner is not confirmed gone; "
        "`list` reports this entry as `unprobed`\n",
    )


def test_a_detached_run_that_did_not_start_is_named_as_the_reference_names_it(tmp_path, isolated_registry):
    jsonl = tmp_path / "detached.jsonl"
    done = run_cli("run", "--jsonl", jsonl, "--run-id", "never", "--detach", "--", "definitely-not-a-real-program-t198")
    assert done.returncode == 101  # the code the foreground would report
    assert done.stderr.decode() == (
        "processkit-cli: run `never` did not start: the detached runner failed with the same code it would "
        f"have reported in the foreground (101); see `{jsonl}`: `definitely-not-a-real-program-t198` not found on PATH\n"
    )
    assert [e["event"] for e in read_events(jsonl)] == ["spawn_failed", "runner_exit"]


def test_a_zero_grace_is_said_in_milliseconds(tmp_path):
    # The reference's duration words: whole seconds as "5s", anything else, zero included, in ms.
    done = run_cli("run", "--jsonl", tmp_path / "run.jsonl", "--timeout", "1s", "--grace", "0", "--", "sleep", "30")
    assert done.returncode == 106
    assert done.stderr.decode().startswith("processkit-cli: run timed out after 1s: ")
    assert ", waited 0ms grace, then hard-killed" in done.stderr.decode()


def test_the_services_run_stopped_before_it_began_says_the_clis_headline():
    # An API call interrupted while its run was still queued gets the service's own reply: its
    # message is the one the CLI's runner prints for a stop before the spawn.
    from processkit.service.request import cancelled

    kind, message, retryable = cancelled("ctrl_c")["failure"]
    assert (kind, message, retryable) == ("cancelled", "run cancelled (Ctrl-C): the child was not started", False)


def test_prune_says_there_is_nothing_only_when_every_count_is_zero(isolated_registry):
    # The reference's words: "no stale entries to prune" (with " (dry run)" for a preview) when
    # the tally is all zeros; a kept live or unprobeable entry is a tally line. Only the first
    # line is the registry's: what dead runners left on the host follows it.
    first = lambda *args: run_cli("prune", *args).stdout.decode().splitlines()[0]  # noqa: E731
    assert first() == "no stale entries to prune"
    assert first("--dry-run") == "no stale entries to prune (dry run)"
    plant_record(isolated_registry, "odd", "odd")
    (isolated_registry / "odd.lock").mkdir()  # cannot be opened: unprobed, kept
    assert first() == "pruned 0 stale (0 orphaned locks), kept 0 live, left 1 unprobeable"
    assert first("--dry-run") == "would prune 0 stale (0 orphaned locks), keep 0 live, leave 1 unprobeable"


def test_events_for_a_run_no_record_names_is_said_in_the_reference_words(isolated_registry):
    done = run_cli("events", "--run-id", "gone-42")
    assert (done.returncode, done.stderr.decode()) == (
        103,
        "processkit-cli: cannot read events for run `gone-42`: no registry record names it — a run that exits "
        "cleanly deletes its own record, so read its stream directly with `--file <events.jsonl>`\n",
    )


def test_a_line_not_utf8_is_replaced_and_reported_and_passed_through_byte_for_byte(tmp_path):
    """The reference's contract: invalid UTF-8 is replaced (U+FFFD) and reported, and ``--json``
    passes source lines through byte-for-byte. The line is rendered and checked as its replaced
    text (a conforming stream still passes); one note per such line, in the frame of the other
    per-line notes; nothing of it under ``--error-format json``."""
    jsonl, _ = _captured_run(tmp_path)
    lines = jsonl.read_bytes().splitlines(keepends=True)
    start = lines[0].replace(b'"run_id":"', b'"run_id":"bad\xff', 1)
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_bytes(start + b"".join(lines[1:]))
    byte = start.index(b"\xff") + 1
    shown_line = sanitize(start.rstrip(b"\n").decode("utf-8", "replace"))  # capped as any note's text
    said = f"line 1: not valid UTF-8 (byte {byte}), replaced with U+FFFD: {shown_line}\n"
    checked = run_cli("events", "--file", damaged, "--validate")
    assert (checked.returncode, checked.stderr.decode()) == (0, said), checked.stdout
    assert checked.stdout.decode().endswith(f"checked {len(lines)} lines: all valid\n")
    passed = run_cli("events", "--file", damaged, "--json")
    assert (passed.returncode, passed.stderr.decode()) == (0, said)
    assert passed.stdout == start + b"".join(lines[1:])  # the source bytes, \xff and all
    shown = run_cli("events", "--file", damaged)
    assert (shown.returncode, shown.stderr.decode()) == (0, said)
    assert "bad\ufffd" in shown.stdout.decode().splitlines()[0]
    quiet = run_cli("events", "--error-format", "json", "--file", damaged, "--json")
    assert (quiet.returncode, quiet.stderr, quiet.stdout) == (0, b"", passed.stdout)


def test_a_line_that_is_no_event_is_named_bare_on_stderr(tmp_path):
    # The reference prints its per-line notice (and its follow note) with no program prefix.
    jsonl, _ = _captured_run(tmp_path)
    lines = jsonl.read_text().splitlines(keepends=True)
    noisy = tmp_path / "noisy.jsonl"
    noisy.write_text(lines[0] + "{ not json\n" + "".join(lines[1:]))
    for mode in ((), ("--json",)):
        shown = run_cli("events", "--file", noisy, *mode)
        assert shown.returncode == 0
        assert shown.stderr.decode().startswith("line 2: not valid JSON (")
        assert shown.stderr.decode().endswith("): { not json\n")


def test_an_unreadable_registry_is_said_in_the_reference_words(tmp_path, monkeypatch):
    # A registry path that is a file: the whole-registry commands fail 111, the by-id clients
    # 103 with their own prefix, both with the reference's "could not read the run registry".
    blocker = tmp_path / "registry"
    blocker.write_text("")
    monkeypatch.setenv("PROCESSKIT_CLI_REGISTRY_DIR", str(blocker))
    _the_clients_say("could not read the run registry: Not a directory (os error 20)\n")


@pytest.mark.parametrize("refused", ["link", "shared"])
def test_a_registry_the_clients_refuse_is_said_as_a_refusal_not_a_system_error(tmp_path, monkeypatch, refused):
    """A link and a directory others can write into are this build's refusals, in one
    wording; no system error number is made up for them."""
    real = tmp_path / "real"
    real.mkdir()
    os.chmod(real, 0o777 if refused == "shared" else 0o700)
    registry = real
    if refused == "link":
        registry = tmp_path / "reglink"
        registry.symlink_to(real)
    monkeypatch.setenv("PROCESSKIT_CLI_REGISTRY_DIR", str(registry))
    why = "is a symbolic link" if refused == "link" else "is a directory other users can write into (mode 0777)"
    _the_clients_say(f"cannot open the registry directory {registry}: {registry} {why}\n")


def _the_clients_say(cause: str) -> None:
    """A whole-registry client fails 111 with ``cause``, a by-id one 103 after its own prefix."""
    listed = run_cli("list")
    assert (listed.returncode, listed.stderr.decode()) == (111, f"processkit-cli: {cause}")
    inspected = run_cli("inspect", "--run-id", "x")
    assert (inspected.returncode, inspected.stderr.decode()) == (
        103,
        f"processkit-cli: cannot inspect run `x`: {cause}",
    )


def test_a_runs_setup_failures_are_said_in_the_reference_words(tmp_path):
    """Each pre-spawn input the run cannot use is named as the reference names it, the path as
    given and the system's error with its number; a line an env file gets wrong is said without
    its value. The stream ends `setup` (111) and no child starts."""
    (tmp_path / "bad.env").write_text("GOOD=value\nBAD KEY=secret\n")
    (tmp_path / "file").write_text("")
    (tmp_path / "dangling").symlink_to("nowhere")
    cases = [
        ([], "could not open the JSONL events file `nodir/e.jsonl`: No such file or directory (os error 2)"),
        (["--stdin-file", "absent"], "could not open stdin file `absent`: No such file or directory (os error 2)"),
        (["--capture-dir", "file/cap"], "could not set up output capture in `file/cap`: Not a directory (os error 20)"),
        # the reference's create_dir says EEXIST of a last component there and no directory
        (["--capture-dir", "file"], "could not set up output capture in `file`: File exists (os error 17)"),
        (["--capture-dir", "file/"], "could not set up output capture in `file/`: File exists (os error 17)"),
        # its mkdir does not follow a link: one to nothing is there, and no directory is made
        (["--capture-dir", "dangling"], "could not set up output capture in `dangling`: File exists (os error 17)"),
        (
            ["--capture-dir", "dangling/cap"],
            "could not set up output capture in `dangling/cap`: File exists (os error 17)",
        ),
        (["--env-file", "absent"], "could not read environment file `absent`: No such file or directory (os error 2)"),
        (
            ["--env-file", "bad.env"],
            "invalid environment file `bad.env`: line 2: an environment key may not contain whitespace",
        ),
    ]
    for flags, said in cases:
        jsonl = "e.jsonl" if flags else "nodir/e.jsonl"
        command = ("--", "sh", "-c", "echo child-must-not-start")
        done = run_cli("run", "--jsonl", jsonl, *flags, *command, cwd=tmp_path)
        assert (done.returncode, done.stdout, done.stderr.decode()) == (111, b"", f"processkit-cli: {said}\n"), flags
        if flags:
            assert [e["event"] for e in read_events(tmp_path / jsonl)] == ["runner_exit"]
    assert not (tmp_path / "nowhere").exists()
    missing = run_cli("events", "--file", tmp_path / "nowhere.jsonl")
    assert (missing.returncode, missing.stderr.decode()) == (
        111,
        f"processkit-cli: could not open the events stream `{tmp_path}/nowhere.jsonl`: No such file or directory (os error 2)\n",
    )
