"""Bad input (issue 23): values too long for Python's int conversion, and what may reach stderr
under ``--error-format json``."""

from __future__ import annotations

import sys

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import run_cli
from control_support import envelope
from processkit.cli import values
from processkit.errors import Failure
from processkit.spec import U32_MAX, U64_MAX

HUGE = "9" * 5000  # past Python's 4,300-digit int-string limit


# -- numbers of any length ----------------------------------------------------------------------
def _exact(digits: str) -> int:
    """The value of ``digits`` with the int-string limit lifted for the test."""
    previous = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        return int(digits)
    finally:
        sys.set_int_max_str_digits(previous)


long_digits = st.builds(
    lambda zeros, digits: "0" * zeros + digits,
    st.integers(0, 6000),
    st.text(alphabet="0123456789", min_size=1, max_size=6000),
)


@settings(max_examples=300, deadline=None)
@given(long_digits, st.sampled_from(["", "ms", "s", "m", "h"]))
@example("9" * 4301, "")
@example("0" * 5000 + "1", "ms")
@example("18446744073709551615", "ms")
@example("18446744073709551616", "ms")
def test_a_duration_of_any_length_is_its_value_or_a_usage_error(digits, unit):
    factor = {"": 1000, "ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}[unit]
    expected = _exact(digits) * factor
    try:
        got = values.parse_duration_ms(digits + unit, positive=False, flag="--grace")
    except Failure as failure:
        assert failure.code == 100 and expected > U64_MAX, failure.message
    else:
        assert got == expected <= U64_MAX


@settings(max_examples=300, deadline=None)
@given(long_digits, st.sampled_from(["", "b", "k", "M", "g"]))
@example("9" * 4301, "k")
def test_a_size_of_any_length_is_its_value_or_a_usage_error(digits, suffix):
    expected = _exact(digits) * {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[suffix.lower()]
    try:
        got = values.parse_size(digits + suffix, flag="--max-memory")
    except Failure as failure:
        assert failure.code == 100 and not 0 < expected <= U64_MAX, failure.message
    else:
        assert got == expected


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["", "+"]), long_digits)
@example("+", "0" * 5000 + "7")
def test_a_count_of_any_length_is_its_value_or_a_usage_error(sign, digits):
    expected = _exact(digits)
    try:
        got = values.parse_max_processes(sign + digits)
    except Failure as failure:
        assert failure.code == 100 and not 1 <= expected <= U32_MAX, failure.message
    else:
        assert got == expected


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--jsonl", "{jsonl}", "--timeout", HUGE, "--", "true"],
        ["run", "--jsonl", "{jsonl}", "--max-memory", HUGE + "k", "--", "true"],
        ["run", "--jsonl", "{jsonl}", "--max-processes", HUGE, "--", "true"],
        ["run", "--jsonl", "{jsonl}", "--grace", "0" * 5000 + "1s", "--timeout", HUGE + "ms", "--", "true"],
        ["wait", "--run-id", "r1", "--timeout", HUGE],
        ["probe", "--json", "--require-schema-version", HUGE],
    ],
    ids=["timeout", "max-memory", "max-processes", "leading-zeros", "wait-timeout", "probe-schema-version"],
)
def test_a_value_past_the_int_string_limit_is_a_usage_error(tmp_path, args):
    jsonl = tmp_path / "run.jsonl"
    proc = run_cli(*[str(jsonl) if arg == "{jsonl}" else arg for arg in args])
    assert proc.returncode == 100, proc.stderr[-300:]
    assert b"internal error" not in proc.stderr
    assert not jsonl.exists()


def test_an_api_keyword_past_the_int_string_limit_is_a_value_error():
    from processkit import api

    for keyword in ("timeout", "max_memory", "max_processes"):
        with pytest.raises(ValueError, match="too large"):
            api.run(["true"], **{keyword: 10**5000})


# -- --error-format json: the envelope and nothing else -----------------------------------------
