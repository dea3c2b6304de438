"""The parts of a failed job's capture cut for the lines that say why (why72): ``whole_chars``
cuts at a character's end, a 3- or 4-byte one too, and keeps a byte no character holds (shown
as U+FFFD, as any); a line longer than a piece whose start says why shows its start; one the
search's bound cuts says its rest was not searched."""

from __future__ import annotations

import pytest

from processkit.report import why_lines
from processkit.text import whole_chars

EURO, FACE = "\u20ac".encode(), "\U0001f600".encode()  # 3 bytes, 4 bytes


@pytest.mark.parametrize("char", [EURO, FACE], ids=["3-byte", "4-byte"])
def test_a_cut_inside_a_long_character_leaves_it_out_whole(char):
    for keep in range(1, len(char)):
        assert whole_chars(b"a" + char + char[:keep], tail_cut=True) == b"a" + char
        assert whole_chars(char[keep:] + b"b" + char, head_cut=True) == b"b" + char
    assert whole_chars(b"a" + char, head_cut=True, tail_cut=True) == b"a" + char


@pytest.mark.parametrize(
    "data",
    [b"a\xff", b"a\xf8", b"a\x80\x80\x80\x80", b"\xe2\x82\xac\x80"],
    ids=["ff", "f8", "4-continuations", "stray"],
)
def test_bytes_no_character_holds_are_kept_at_a_cut(data):
    assert whole_chars(data, tail_cut=True) == data
    assert whole_chars(b"z" + data, head_cut=True) == b"z" + data
