"""The value grammars' figures, in process: what a size's unit multiplies by, what an int or a
float of seconds becomes, where a count's bounds are, which code points are lone surrogates.
test_value_grammars.py checks the grammars split text as their regexes do; a mutation pass
(bench/README.md, "Mutation testing") found the values these give unpinned there."""

from __future__ import annotations

import pytest

from processkit.api.options import run_spec
from processkit.cli.run import parse as parse_run
from processkit.errors import Failure
from processkit.grammar import values
from processkit.spec import StdinMode


@pytest.mark.parametrize(
    "text, expected",
    [("3", 3), ("3b", 3), ("1k", 1 << 10), ("1K", 1 << 10), ("2m", 2 << 20), ("1g", 1 << 30), ("01k", 1024)],
)
def test_a_size_is_its_digits_times_its_binary_unit(text, expected):
    assert values.parse_size(text, "--max-memory") == expected


@pytest.mark.parametrize(
    "value, expected",
    [("2", 2000), ("2s", 2000), ("2ms", 2), ("2m", 120_000), ("2h", 7_200_000), (2, 2000), (0.25, 250), (1.0005, 1000)],
)
def test_a_duration_is_whole_milliseconds(value, expected):
    assert values.parse_duration_ms(value, "--timeout", positive=True) == expected


def test_an_endless_duration_is_too_large():
    with pytest.raises(Failure, match="duration is too large"):
        values.parse_duration_ms(float("inf"), "--timeout", positive=True)


def test_zero_is_a_duration_only_where_it_may_be():
    assert values.parse_duration_ms("0", "--grace", positive=False) == 0
    assert values.parse_duration_ms(0, "--grace", positive=False) == 0
    for zero in ("0", "0ms", 0, 0.0):
        with pytest.raises(Failure, match="duration must be greater than zero"):
            values.parse_duration_ms(zero, "--timeout", positive=True)
    for rounded in (0.0004, 0.0005):  # above zero, rounded to it (round(0.5) is 0)
        with pytest.raises(Failure, match=r"duration rounds to 0ms \(a duration is counted in whole milliseconds\)$"):
            values.parse_duration_ms(rounded, "--timeout", positive=True)
    assert values.parse_duration_ms(0.0006, "--timeout", positive=True) == 1  # rounded up to it
    assert values.parse_duration_ms("1ms", "--timeout", positive=True) == 1  # the least that is not zero


@pytest.mark.parametrize("value", [1, 5, "1", "+5", "5"])
def test_a_count_takes_its_bounds(value):
    assert values.parse_count(value, "--jobs", low=1, high=5) == int(value)


@pytest.mark.parametrize("value", [0, 6, "0", "6", -1])
def test_a_count_refuses_what_is_past_its_bounds(value):
    with pytest.raises(Failure, match="expected a whole number from 1 to 5"):
        values.parse_count(value, "--jobs", low=1, high=5)


@pytest.mark.parametrize("ch", ["\ud800", "\udbff", "\udc00", "\udfff"])
def test_every_surrogate_is_refused_first_and_last_included(ch):
    assert values.text_problem("a" + ch) == f"a lone surrogate ({ch!a})"


@pytest.mark.parametrize("ch", ["\ud7ff", "\ue000", "é"])
def test_the_code_points_beside_the_surrogates_are_text(ch):
    assert values.text_problem("a" + ch) is None


def test_a_choice_refused_names_every_choice():
    with pytest.raises(Failure, match="expected head, tail or head-tail$"):
        values.parse_choice("middle", ("head", "tail", "head-tail"), "--capture-keep")


@pytest.mark.parametrize("keyword", ["inherit_stdin", "inherit_stdio"])
def test_each_inherit_keyword_alone_inherits_stdin(keyword):
    """The CLI and the API share ``grammar.run.build``, so comparing them cannot see this."""
    assert run_spec(["true"], {keyword: True}, jsonl="j", function="run", fixed={}).stdin is StdinMode.INHERIT
    assert run_spec(["true"], {}, jsonl="j", function="run", fixed={}).stdin is StdinMode.NULL
    flag = "--" + keyword.replace("_", "-")
    assert parse_run(["--jsonl", "j", flag, "--", "true"]).stdin is StdinMode.INHERIT


@pytest.mark.parametrize(
    "keywords, message",
    [
        ({"env_file": 5}, "env_file takes a list, not int"),
        ({"env_remove": 5}, "env_remove takes a list, not int"),
        ({"labels": 5}, "labels takes a list or a mapping, not int"),
        ({"labels": b"a=b"}, "labels takes a list or a mapping, not bytes"),
        ({"env_file": {"a": "b"}}, "env_file takes a list, not a mapping"),
    ],
)
def test_a_repeatable_keyword_given_one_value_names_what_it_takes(keywords, message):
    """A single text where a list is wanted would be read letter by letter: refused, and the
    message says a mapping is also taken only where the keyword's items are K=V."""
    with pytest.raises(TypeError, match=f"^{message}$"):
        run_spec(["true"], keywords, jsonl="j", function="run", fixed={})


def test_a_mapping_is_taken_where_the_items_are_k_v():
    spec = run_spec(["true"], {"labels": {"lane": "a"}}, jsonl="j", function="run", fixed={})
    assert dict(spec.labels) == {"lane": "a"}


def test_a_pty_size_takes_each_side_from_1_to_65535():
    assert values.parse_pty_size("1x65535") == (1, 65535) and values.parse_pty_size("65535x1") == (65535, 1)
    for text in ("0x24", "80x0", "65536x24", "80x65536"):
        with pytest.raises(Failure, match="expected COLSxROWS, each 1-65535"):
            values.parse_pty_size(text)
