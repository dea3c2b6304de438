"""The child's environment: clear → remove → files → --env → --run-id-env, whatever the order
on the command line, and the env-file rules of docs/run.md §2.4."""

from __future__ import annotations

import os
import shutil

import pytest

from conftest import run_cli
from streams import check_stream, one, run_checked, stderr_lines

# coreutils env, not Python: an interpreter may add variables of its own (locale coercion).
PRINT_ENV = [shutil.which("env"), "-0"]


def child_env(tmp_path, *args, runner_env: dict | None = None) -> tuple[dict, list[dict]]:
    env = {**os.environ, **(runner_env or {})}
    proc, events = run_checked(tmp_path, *args, command=PRINT_ENV, returncode=0, env=env)
    entries = proc.stdout.decode().split("\0")[:-1]
    return dict(entry.partition("=")[::2] for entry in entries), events


def env_file(tmp_path, name: str, content: bytes):
    path = tmp_path / name
    path.write_bytes(content)
    return path


def test_the_documented_order_wins_over_the_command_line_order(tmp_path):
    first = env_file(tmp_path, "first.env", b"SHARED=first\nREMOVED_THEN_FILED=file\nRID=file\nONLY_FILE=1\n")
    second = env_file(tmp_path, "second.env", b"SHARED=second\nFLAG_BEATS_FILE=file\n")
    args = (
        "--env",
        "FLAG_BEATS_FILE=flag",  # given before the files, applied after them
        "--env",
        "KEPT_AFTER_REMOVE=flag",
        "--env-file",
        first,
        "--env-file",
        second,
        "--env-remove",
        "REMOVED_THEN_FILED",
        "--env-remove",
        "KEPT_AFTER_REMOVE",  # removal comes before --env, so it removes nothing
        "--env-remove",
        "GONE",
        "--env-remove",
        "RID",
        "--run-id-env",
        "RID",
        "--run-id",
        "order-test",
    )
    runner = {"GONE": "runner", "REMOVED_THEN_FILED": "runner", "KEEP": "runner", "SHARED": "runner"}
    env, _ = child_env(tmp_path, *args, runner_env=runner)
    assert env["KEEP"] == "runner" and "GONE" not in env
    assert env["REMOVED_THEN_FILED"] == "file"
    assert env["SHARED"] == "second" and env["ONLY_FILE"] == "1"
    assert env["FLAG_BEATS_FILE"] == "flag" and env["KEPT_AFTER_REMOVE"] == "flag"
    assert env["RID"] == "order-test"


def test_env_clear_starts_from_nothing(tmp_path):
    vars_file = env_file(tmp_path, "vars.env", b"FROM_FILE=1\n")
    env, _ = child_env(tmp_path, "--env-file", vars_file, "--env-clear", "--env", "ONLY=1", runner_env={"LEAK": "x"})
    assert env == {"FROM_FILE": "1", "ONLY": "1"}


def test_run_id_env_carries_the_generated_id(tmp_path):
    env, events = child_env(tmp_path, "--run-id-env", "PROCESSKIT_RUN_ID")
    assert env["PROCESSKIT_RUN_ID"] == one(events, "run_started")["run_id"]


def test_no_run_id_variable_is_injected_by_default(tmp_path):
    env, events = child_env(tmp_path, runner_env={"MARK": "1"})
    assert env["MARK"] == "1"
    assert one(events, "run_started")["run_id"] not in env.values()


def test_env_values_are_taken_verbatim(tmp_path):
    args = ("--env", "EMPTY=", "--env", "EQUALS=a=b=c", "--env", "SPACES= padded ", "--env", "lower.dash-key=ok")
    env, _ = child_env(tmp_path, *args)
    assert (env["EMPTY"], env["EQUALS"], env["SPACES"], env["lower.dash-key"]) == ("", "a=b=c", " padded ", "ok")


def test_env_file_lines_are_parsed_like_env_flags(tmp_path):
    content = (
        b"# a comment\n"
        b"   # an indented comment\n"
        b"\n"
        b"   \t \n"
        b"CRLF=yes\r\n"
        b'QUOTED="kept"\n'
        b"SINGLE='kept'\n"
        b"PADDED=  both sides  \n"
        b"EQUALS=a=b\n"
        b"EMPTY=\n"
        b"HASH=value # not a comment\n"
        b"UTF8=\xc3\xa9t\xc3\xa9\n"
        b"LAST=no newline at the end"
    )
    env, _ = child_env(tmp_path, "--env-file", env_file(tmp_path, "vars.env", content))
    assert env["CRLF"] == "yes"
    assert (env["QUOTED"], env["SINGLE"]) == ('"kept"', "'kept'")
    assert env["PADDED"] == "  both sides  " and env["EQUALS"] == "a=b" and env["EMPTY"] == ""
    assert env["HASH"] == "value # not a comment" and env["UTF8"] == "\u00e9t\u00e9"
    assert env["LAST"] == "no newline at the end"
    assert not any(key.startswith(("#", " ")) for key in env)


def test_a_byte_order_mark_an_editor_put_first_is_no_part_of_the_first_key(tmp_path):
    """Notepad's UTF-8 begins a file with EF BB BF: the child got a variable named
    "\ufeffFIRST" (a character no terminal shows) and no FIRST, without a word."""
    path = env_file(tmp_path, "bom.env", b"\xef\xbb\xbfFIRST=1\r\nSECOND=2\r\n")
    env, _ = child_env(tmp_path, "--env-clear", "--env-file", path)
    assert env == {"FIRST": "1", "SECOND": "2"}


@pytest.mark.parametrize(
    "content, line",
    [
        (b"GOOD=1\nexport KEY=hunter2\n", 2),
        (b"GOOD=1\n\n  PADDED_KEY=hunter2\n", 3),
        (b"NO_EQUALS_hunter2\n", 1),
        (b"=hunter2\n", 1),
        (b"A\xc2\xa0B=hunter2\n", 1),
        (b"A\x01B=hunter2\n", 1),
    ],
    ids=["export", "leading-space", "no-equals", "empty-key", "nbsp", "control"],
)
def test_a_malformed_env_file_is_a_setup_failure_naming_the_line_not_the_value(tmp_path, content, line):
    path = env_file(tmp_path, "bad.env", content)
    marker = tmp_path / "child-ran"
    jsonl = tmp_path / "run.jsonl"
    proc = run_cli("run", "--jsonl", jsonl, "--env-file", path, "--", "touch", marker)
    assert proc.returncode == 111 and not marker.exists()
    [message] = stderr_lines(proc)
    assert f"line {line}" in message and "hunter2" not in message
    assert [e["event"] for e in check_stream(jsonl, 111)] == ["runner_exit"]


@pytest.mark.parametrize("kind", ["not-utf8", "missing", "directory"])
def test_an_unreadable_env_file_is_a_setup_failure(tmp_path, kind):
    path = {
        "not-utf8": lambda: env_file(tmp_path, "latin1.env", b"NAME=caf\xe9\n"),
        "missing": lambda: tmp_path / "missing.env",
        "directory": lambda: tmp_path,
    }[kind]()
    marker = tmp_path / "child-ran"
    jsonl = tmp_path / "run.jsonl"
    proc = run_cli("run", "--jsonl", jsonl, "--env-file", path, "--", "touch", marker)
    assert proc.returncode == 111 and not marker.exists()
    events = check_stream(jsonl, 111)
    assert events[-1]["source"] == "setup" and len(events) == 1
    assert b"caf" not in proc.stderr


def test_a_later_bad_env_file_fails_even_after_good_ones(tmp_path):
    good = env_file(tmp_path, "good.env", b"A=1\n")
    proc = run_cli(
        "run", "--jsonl", tmp_path / "r.jsonl", "--env-file", good, "--env-file", tmp_path / "nope.env", "--", "true"
    )
    assert proc.returncode == 111 and "nope.env" in stderr_lines(proc)[0]


@pytest.mark.parametrize("given", [None, "C", "POSIX", "C.UTF-8"], ids=["unset", "C", "POSIX", "utf8"])
def test_the_runners_locale_coercion_never_reaches_the_child(tmp_path, given):
    """Under a C locale (no ``LANG``: cron, ``env -i``, containers) the runner's interpreter sets
    ``LC_CTYPE=C.UTF-8`` in its own environment (PEP 538); the child gets the caller's
    ``LC_CTYPE`` as it was, or none, since nothing is injected by default (docs/run.md §2.4)."""
    runner = {key: value for key, value in os.environ.items() if not key.startswith(("LC_", "LANG", "PYTHONCOERCE"))}
    if given is not None:
        runner["LC_CTYPE"] = given
    proc, _ = run_checked(tmp_path, command=PRINT_ENV, returncode=0, env=runner)
    env = dict(entry.partition("=")[::2] for entry in proc.stdout.decode().split("\0")[:-1])
    assert env.get("LC_CTYPE") == given


@pytest.mark.parametrize("flag", ["--run-id-env", "--env-remove"])
@pytest.mark.parametrize("given", ["FOO=bar", "FOO=", "=do-not-print-this-secret", "FOO=a=b"])
def test_a_pair_where_a_bare_key_is_asked_is_said_as_that_mistake(tmp_path, flag, given):
    # The reference's key parser names the shape mistake (a bare KEY is wanted), never the value.
    jsonl = tmp_path / "events.jsonl"
    proc = run_cli("run", "--jsonl", jsonl, flag, given, "--", "true")
    assert proc.returncode == 100 and proc.stdout == b"" and not jsonl.exists()
    said = proc.stderr.decode()
    assert f"'{flag}'" in said and "bare KEY" in said, said
    assert "do-not-print-this-secret" not in said and "bar" not in said.replace("bare", "")
