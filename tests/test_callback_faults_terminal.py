"""A run that lent the terminal to its child (``--inherit-stdin`` on a real terminal) watches
SIGCHLD for the child's stop there and is told of SIGCONT: a fault in either hook is that run's
own failure, as any callback's (tests/test_callback_faults.py): the run ends 104 with its
teardown and ``runner_exit{internal}``. Before, the fault left the loop (SIGCHLD's check) or the
signal's dispatch (SIGCONT's hook) and the stream ended with no ``runner_exit``."""

from __future__ import annotations

import os
import signal

import pytest

from conftest import patched_cli, pid_alive, read_events_tolerant, wait_for_event
from test_io_modes_terminal import Terminal, _runner_of, _state_becomes


@pytest.fixture
def terminal(tmp_path):
    term = Terminal(tmp_path)
    yield term
    term.close()


def _ended_as_the_runners_failure(terminal: Terminal) -> None:
    assert terminal.finish()["rc"] == 104
    last = read_events_tolerant(terminal.jsonl)[-1]
    assert [last.get(key) for key in ("event", "code", "source")] == ["runner_exit", 104, "internal"]


def _stopped_and_continued(terminal: Terminal, mode: str, cli: list[str]) -> None:
    """A run of ``cli`` in ``mode`` stopped with its tree (SIGTSTP to the runner) and continued
    (what ``fg`` sends the job): it ends as the runner's failure, its child killed."""
    terminal.run(mode, behaviour="wait", placement="job", cli=cli)
    child = wait_for_event(terminal.jsonl, "run_started")["root_pid"]
    terminal.child_facts()
    runner = _runner_of(child)
    os.kill(runner, signal.SIGTSTP)
    assert _state_becomes(runner, "T")
    os.killpg(runner, signal.SIGCONT)
    _ended_as_the_runners_failure(terminal)
    assert not pid_alive(child)


def test_a_fault_in_the_child_stop_check_ends_the_run_with_its_stream(terminal):
    """The check runs at the first SIGCHLD: the child's own exit here."""
    faulty = patched_cli("lending", "stopped_in_front", "lambda *args: 1 / 0")
    terminal.run("--inherit-stdin", behaviour="exit", placement="job", cli=faulty)
    _ended_as_the_runners_failure(terminal)


def test_a_fault_in_the_continue_hook_ends_the_run_with_its_stream(terminal):
    """The runner stopped with its tree (SIGTSTP) and continued: its hook lends the terminal
    again, and raises."""
    _stopped_and_continued(terminal, "--inherit-stdin", patched_cli("lending", "lend_again", "lambda *args: 1 / 0"))


STATE = "importlib.import_module('processkit.engine.state')"


def test_a_fault_in_a_pty_runs_keyboard_hook_at_sigcont_ends_the_run_with_its_stream(terminal):
    """A ``--pty`` run's keyboard takes raw mode back at every SIGCONT (``keys_again``): raising."""
    faulty = patched_cli("launch", "Launched", f"type('L', ({STATE}.Launched,), {{'keys_again': lambda self: 1 / 0}})")
    _stopped_and_continued(terminal, "--pty", faulty)
