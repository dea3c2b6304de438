"""``run --detach``'s words for a copy that ended before its start, with no process: each way a
copy can end (a run's own code, another reserved code, any other exit, a signal) is said as the
reference's detached_start_failure says it, its exit status in Rust's ``ExitStatus`` words."""

from __future__ import annotations

import pytest

from processkit.cli.detach import Handshake
from processkit.errors import Kind


class _Ended:
    """A copy that has ended with ``returncode`` (as ``Popen`` gives it: -N for signal N)."""

    def __init__(self, returncode: int):
        self.returncode = returncode


def _failure(tmp_path, returncode: int):
    jsonl = tmp_path / "missing.jsonl"  # no stream: the words end at the path
    return Handshake(_Ended(returncode), str(jsonl), "r1", stream=None)._relayed_failure(), jsonl


@pytest.mark.parametrize("code", [105, 112, 119])
def test_a_reserved_code_no_run_reports_is_relayed_as_unknown(tmp_path, code):
    failure, jsonl = _failure(tmp_path, code)
    assert (failure.kind, failure.code) == (Kind.UNKNOWN, code)
    assert failure.message == (
        f"run `r1` did not start: the detached runner exited with the reserved-band code {code}, which this "
        "build's own `run` never reports — the binary on disk may have been replaced between the spawn and "
        f"the exec; see `{jsonl}`"
    )


@pytest.mark.parametrize(
    ("returncode", "status"),
    [
        (1, "exit status: 1"),
        (0, "exit status: 0"),
        (255, "exit status: 255"),
        (99, "exit status: 99"),
        (-9, "signal: 9 (SIGKILL)"),
        (-6, "signal: 6 (SIGABRT)"),
        (-29, "signal: 29 (SIGIO)"),
        (-30, "signal: 30 (SIGPWR)"),
        (-34, "signal: 34"),  # a real-time signal has no name in Rust's words
        (-64, "signal: 64"),
    ],
)
def test_any_other_end_is_a_setup_failure_with_its_exit_status(tmp_path, returncode, status):
    failure, jsonl = _failure(tmp_path, returncode)
    assert (failure.kind, failure.code) == (Kind.SETUP, 111)
    assert failure.message == (
        f"run `r1` did not start: the detached runner exited ({status}) without recording a started run; see `{jsonl}`"
    )
