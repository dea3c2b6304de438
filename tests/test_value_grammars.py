"""The value grammars of processkit/cli/values.py, checked with str methods, against the regular
expressions that state them: the same texts accepted, split into the same parts."""

from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from processkit import text as text_rules
from processkit.grammar import values

DURATION = re.compile(r"[0-9]+(ms|s|m|h)?")
SIZE = re.compile(r"[0-9]+([bkmg])?", re.IGNORECASE | re.ASCII)
COUNT = re.compile(r"\+?[0-9]+")
DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")  # Rust's f64, minus inf/nan
PTY_SIZE = re.compile(r"([0-9]{1,5})x([0-9]{1,5})", re.ASCII)

# ASCII digits and the letters the grammars use, with their look-alikes: other scripts' digits,
# superscripts, the Kelvin sign (U+212A, which case-folds to "k"), the long s, full-width forms.
ALPHABET = "0123456789" + "msh" + "bkmgBKMG" + "+-.eEx" + "Xx _" + "\u0663\u00b2\U0001d7d9\u212a\u017f\u0131\uff10"
texts = st.text(alphabet=ALPHABET, max_size=10)


def _digits_and_unit(pattern: re.Pattern, text: str) -> tuple[str, str | None] | None:
    match = pattern.fullmatch(text)
    if match is None:
        return None
    unit = match.group(1)
    return (text[: match.start(1)], unit.lower()) if unit else (text, None)


@settings(max_examples=1000, deadline=None)
@given(texts)
@example("5ms")
@example("\u212a")
@example("1\u212a")
@example("\u0663s")
def test_durations_split_as_the_regex_does(text):
    assert values.split_duration(text) == _digits_and_unit(DURATION, text)


@settings(max_examples=1000, deadline=None)
@given(texts)
@example("1\u212a")
@example("7K")
def test_sizes_split_as_the_regex_does(text):
    assert values.split_size(text) == _digits_and_unit(SIZE, text)


@settings(max_examples=1000, deadline=None)
@given(texts)
@example("+")
@example("+\u0663")
def test_counts_are_accepted_as_the_regex_does(text):
    assert values.is_count(text) == (COUNT.fullmatch(text) is not None)


@settings(max_examples=2000, deadline=None)
@given(texts)
@example("1.")
@example(".5e-3")
@example(".")
@example("1e")
@example("-.e1")
@example("1E+5")
@example("1e5e5")
def test_decimals_are_accepted_as_the_regex_does(text):
    accepted = values.is_decimal(text)
    assert accepted == (DECIMAL.fullmatch(text) is not None)
    if accepted:
        float(text)  # what parse_cpu_quota converts it with


@settings(max_examples=1000, deadline=None)
@given(texts)
@example("80x24")
@example("123456x1")
@example("x")
@example("1x2x3")
def test_pty_sizes_split_as_the_regex_does(text):
    match = PTY_SIZE.fullmatch(text)
    assert values.split_pty_size(text) == (match.groups() if match else None)


LABEL_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9._-]*")


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet="aZ_09.-=/ \u00e9\u212a\u0663\u00aa", max_size=70))
@example("")
@example("a" * 64)
@example("a" * 65)
@example("\u00aa")
def test_label_keys_are_accepted_as_the_regex_does(text):
    assert text_rules.is_valid_label_key(text) == (LABEL_KEY.fullmatch(text) is not None and len(text) <= 64)
