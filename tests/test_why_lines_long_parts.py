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


def _shown(tmp_path, data: bytes, budget: int = why_lines.SEARCH_BYTES) -> why_lines.Shown:
    """What of a capture holding ``data`` is shown, ``budget`` bytes of it searched."""
    path = tmp_path / "stderr.log"
    path.write_bytes(data)
    found = why_lines.shown(str(path), 10, 2, [budget])
    assert found is not None
    return found


def test_a_long_line_whose_start_says_why_shows_its_start(tmp_path):
    found = _shown(tmp_path, b"ok\nError: at the start " + b"w" * (2 << 20) + b"\nlast\n")
    assert found.why == 1 and found.items[:2] == [
        1,
        (2, "Error: at the start " + "w" * 1004 + " [2 MiB more of it cut]"),
    ]


def test_a_long_line_the_search_cuts_says_its_rest_was_not_searched(tmp_path):
    data = b"x" * (2 << 20) + b"Error: y" + b"z" * (2 << 20) + b"\nlast\n"
    found = _shown(tmp_path, data, budget=3 << 20)
    part = "[2 MiB of this line cut] " + "x" * 64 + "Error: y" + "z" * 952 + " [the rest of it, not searched, cut]"
    assert found.why == 1 and found.items[0] == (1, part), found.items
