"""The direct parser of a plain ``run`` (processkit/cli/options.py) against argparse, the parser
it stands in for: wherever the direct one answers, its answer is exactly argparse's; everything
else it leaves to argparse, whose messages and exit codes users see."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from processkit.cli.options import REPEAT, SWITCH, parse_common
from processkit.cli.run import RUN_OPTIONS, build_parser, parse
from processkit.errors import Failure

FLAGS = [option.flag for option in RUN_OPTIONS]
CHOICES = sorted({choice for option in RUN_OPTIONS for choice in option.choices or ()})
STRAY = ["-h", "--help", "--error-format", "--error-format=json", "--", "-", "--tim", "--jsonl-x", "word", "-x"]

values = st.one_of(
    st.sampled_from(["", "5s", "1", "-1", "-5s", "a=b", "=", "--jsonl", "-", "x y", "-x y", *CHOICES]),
    st.text(max_size=6),
)


@st.composite
def tokens(draw) -> list[str]:
    """One flag with or without its value, in the plain, ``=`` or missing form, or a stray token."""
    kind = draw(st.sampled_from(["flag", "flag", "flag", "equals", "bare", "stray", "value"]))
    flag = draw(st.sampled_from(FLAGS))
    if kind == "stray":
        return [draw(st.sampled_from(STRAY))]
    if kind == "value":
        return [draw(values)]
    if kind == "equals":
        return [f"{flag}={draw(values)}"]
    if kind == "bare":
        return [flag]
    return [flag] if _kind(flag) == SWITCH else [flag, draw(values)]


def _kind(flag: str) -> str:
    return next(option.kind for option in RUN_OPTIONS if option.flag == flag)


PARSER = build_parser()  # reusable: what a parse records lives on its namespace


def _argparse(argv: list[str]) -> dict | None:
    try:
        return vars(PARSER.parse(argv))
    except Failure:
        return None


@settings(max_examples=600, deadline=None)
@given(st.lists(tokens(), max_size=8).map(lambda groups: [token for group in groups for token in group]))
def test_the_direct_parser_answers_as_argparse_or_defers(argv):
    direct = parse_common(RUN_OPTIONS, argv)
    if direct is not None:
        assert vars(direct) == _argparse(argv)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from([option for option in RUN_OPTIONS if not option.choices]).flatmap(
            lambda option: (
                st.just([option.flag])
                if option.kind == SWITCH
                else st.from_regex(r"[A-Za-z0-9_./=+:]{1,8}", fullmatch=True).map(
                    lambda value: [option.flag, value] if len(value) % 2 else [f"{option.flag}={value}"]
                )
            )
        ),
        max_size=6,
        unique_by=lambda group: group[0].partition("=")[0],
    ).map(lambda groups: [token for group in groups for token in group])
)
def test_a_well_formed_argv_is_parsed_without_argparse(argv):
    """Each flag at most once (repeatable ones too), values not starting with '-': the common case."""
    direct = parse_common(RUN_OPTIONS, argv)
    assert direct is not None
    assert vars(direct) == _argparse(argv)


def test_repeated_values_keep_their_order_and_unusual_input_defers():
    argv = ["--env", "A=1", "--label", "k=v", "--env=B=2", "--no-echo", "--capture-overflow", "cancel"]
    direct = parse_common(RUN_OPTIONS, argv)
    assert direct is not None and direct.env == ["A=1", "B=2"] and direct.capture_overflow == "cancel"
    assert all(option.kind != REPEAT or option.dest in vars(direct) for option in RUN_OPTIONS)
    for unusual in (["--help"], ["--pty=1"], ["--timeout"], ["--timeout", "-1"], ["--capture-overflow", "x"]):
        assert parse_common(RUN_OPTIONS, unusual) is None


def test_a_run_spec_is_the_same_through_either_parser(monkeypatch):
    argv = ["--jsonl", "f", "--run-id", "r", "--timeout", "5s", "--label", "a=b", "--env=K=V", "--", "true"]
    direct = parse(argv)
    monkeypatch.setattr("processkit.cli.run.parse_common", lambda table, options: None)
    assert parse(argv) == direct
