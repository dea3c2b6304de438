"""A value of a JSON file someone else wrote, named in a message about it (``recorded``): its
kind, or a number cut to a size a message can hold."""

from __future__ import annotations


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def magnitude(value) -> str:
    """A number in a message, cut: a 4,000-digit integer is named by its length, not echoed."""
    if isinstance(value, int) and abs(value) >= 10**15:  # no str(): its cost grows with the digits
        return f"an integer of about {round(abs(value).bit_length() * 0.30103)} digits"
    return f"{value:g}"
