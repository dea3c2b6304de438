"""A call given no run option (issue 49, perf63api): its command is read by the run grammar the
first time it is seen, then its checked spec is taken again with a new run id, so a loop of
``run(cmd)`` does not check the same command at every call. What differs from call to call (the
run id, the working directory, a run option given) is never taken from the kept spec. Through
the real service."""

from __future__ import annotations

import os
from unittest import mock

import processkit
from processkit.api import launch
from processkit.api import options as keyword_options


def counting_grammar(monkeypatch) -> mock.Mock:
    """The run grammar's ``build``, watched from now on (``built``: each call's argv)."""
    build = mock.Mock(wraps=keyword_options.build)
    monkeypatch.setattr(keyword_options, "build", build)
    monkeypatch.setattr(launch, "_CHECKED", {})  # nothing kept from an earlier test or run
    return build


def built(build: mock.Mock) -> list[tuple]:
    return [call.args[0] for call in build.call_args_list]


def test_a_repeated_call_reads_its_command_once_and_gets_a_run_id_of_its_own(monkeypatch):
    build = counting_grammar(monkeypatch)
    command = ["sh", "-c", "exit 0", "perf63api-kept-spec"]  # a command no other test sends
    results = [processkit.run(command) for _ in range(3)]
    assert built(build) == [tuple(command)]  # checked the first time only
    ids = [result.run_id for result in results]
    assert len(set(ids)) == 3
    for result in results:
        assert result.returncode == 0
        assert [event.run_id for event in result.events if event.name == "run_started"] == [result.run_id]


def test_the_working_directory_and_a_run_option_are_read_at_each_call(monkeypatch, tmp_path):
    command = ["sh", "-c", "pwd", "perf63api-kept-cwd"]
    build = counting_grammar(monkeypatch)
    first = processkit.run(command, capture_output=True, text=True)
    assert first.stdout == os.getcwd() + "\n"
    monkeypatch.chdir(tmp_path)
    again = processkit.run(command, capture_output=True, text=True)
    assert again.stdout == str(tmp_path) + "\n"  # the child's directory is this call's
    timed = launch.prepare(command, {"capture_output": True, "timeout": 30}, echo=False, function="run")
    plain = launch.prepare(command, {"capture_output": True}, echo=False, function="run")
    assert built(build) == [tuple(command)] * 2  # the first and the one with an option; the others kept
    assert timed.spec.timeout_ms == 30_000 and plain.spec.timeout_ms is None
    assert plain.spec.cwd == str(tmp_path) and timed.spec.cwd == str(tmp_path)


def test_a_long_command_line_is_read_at_each_call_and_not_kept(monkeypatch):
    build = counting_grammar(monkeypatch)
    command = ["true", *["perf63api-a-long-list-of-files"] * 200]  # about 6,000 characters
    assert sum(map(len, command)) > launch.CHECKED_LONGEST
    for _ in range(2):
        assert processkit.run(command).returncode == 0
    assert built(build) == [tuple(command)] * 2
    assert launch._CHECKED == {}
