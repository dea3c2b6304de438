"""Value grammars shared by every subcommand; each parser raises a usage Failure on bad input.

The grammars are checked with str methods, not regular expressions: ``re`` costs a plain run
more than its own work at start-up. tests/test_value_grammars.py holds each grammar's regular
expression and proves the checks here accept exactly what it accepts, with the same parts.
"""

from __future__ import annotations

from ..errors import usage
from ..spec import U32_MAX, U64_MAX
from ..text import cut, env_key_problem, is_valid_label_key, is_valid_label_value, is_valid_run_id

_DURATION_UNITS = ("ms", "s", "m", "h")  # "ms" before "m" and "s", which it ends or starts with
_DURATION_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, None: 1000}
_SIZE_FACTOR = {None: 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
PTY_SIDE_MAX = 65535  # the kernel's struct winsize holds each side in 16 bits


def is_digits(text: str) -> bool:
    """``[0-9]+``: ``str.isdigit`` alone also takes other scripts' digits and superscripts."""
    return text.isascii() and text.isdigit()


def bounded_int(digits: str, limit: int) -> int | None:
    """The value of ASCII ``digits``, or None when it exceeds ``limit``. Bounded by length before
    converting: ``int()`` refuses more than 4,300 digits (Python's int-string limit, an error no
    grammar names) and is quadratic below it; leading zeros do not count, as in Rust."""
    significant = digits.lstrip("0")
    if len(significant) > len(str(limit)):
        return None
    value = int(significant or "0")
    return value if value <= limit else None


def split_duration(text: str) -> tuple[str, str | None] | None:
    """``[0-9]+(ms|s|m|h)?`` as (digits, unit or None), or None when ``text`` is not one."""
    for unit in _DURATION_UNITS:
        if text.endswith(unit) and is_digits(text[: -len(unit)]):
            return text[: -len(unit)], unit
    return (text, None) if is_digits(text) else None


def split_size(text: str) -> tuple[str, str | None] | None:
    """``[0-9]+[bkmg]?``, any case (ASCII only: the Kelvin sign is no "k"), as (digits, lower-case
    suffix or None), or None when ``text`` is not one."""
    if text[-1:] in ("b", "k", "m", "g", "B", "K", "M", "G") and is_digits(text[:-1]):
        return text[:-1], text[-1].lower()
    return (text, None) if is_digits(text) else None


def is_count(text: str) -> bool:
    """``\\+?[0-9]+``: Rust's unsigned integer syntax, where a "+" is allowed."""
    return is_digits(text[1:] if text.startswith("+") else text)


def is_decimal(text: str) -> bool:
    """``[+-]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?``: Rust's f64 syntax minus inf and nan."""
    body = text[1:] if text.startswith(("+", "-")) else text
    mantissa, has_exponent, exponent = body.replace("E", "e").partition("e")
    if has_exponent and not is_digits(exponent[1:] if exponent.startswith(("+", "-")) else exponent):
        return False
    whole, _, fraction = mantissa.partition(".")
    return bool(whole or fraction) and all(not part or is_digits(part) for part in (whole, fraction))


def split_pty_size(text: str) -> tuple[str, str] | None:
    """``[0-9]{1,5}x[0-9]{1,5}`` as (columns, rows), or None when ``text`` is not one."""
    columns, _, rows = text.partition("x")
    sides = (columns, rows)
    return sides if all(len(side) <= 5 and is_digits(side) for side in sides) else None


def parse_duration_ms(text: str, *, positive: bool, flag: str) -> int:
    """``^[0-9]+(ms|s|m|h)?$``; a bare number is seconds."""
    parts = split_duration(text)
    if parts is None:
        raise usage(
            f"invalid value '{cut(text)}' for '{flag}': expected a whole number with an optional unit ms, s, m or h"
        )
    digits, unit = parts
    value = bounded_int(digits, U64_MAX)
    total = U64_MAX + 1 if value is None else value * _DURATION_MS[unit]
    if total > U64_MAX:
        raise usage(f"invalid value '{cut(text)}' for '{flag}': duration is too large")
    if positive and total == 0:
        raise usage(f"invalid value '{cut(text)}' for '{flag}': duration must be greater than zero")
    return total


def parse_size(text: str, *, flag: str) -> int:
    """``^[0-9]+[bkmg]?$`` in binary units; zero is rejected."""
    parts = split_size(text)
    if parts is None:
        raise usage(
            f"invalid value '{cut(text)}' for '{flag}': expected a whole number with an optional suffix b, k, m or g"
        )
    digits, suffix = parts
    value = bounded_int(digits, U64_MAX)
    total = U64_MAX + 1 if value is None else value * _SIZE_FACTOR[suffix]
    if total == 0:
        raise usage(f"invalid value '{cut(text)}' for '{flag}': size must be greater than zero")
    if total > U64_MAX:
        raise usage(f"invalid value '{cut(text)}' for '{flag}': size is too large")
    return total


def parse_max_processes(text: str, *, flag: str = "--max-processes") -> int:
    """A u32 of at least 1."""
    value = bounded_int(text.removeprefix("+"), U32_MAX) if is_count(text) else None
    if value is None or value < 1:
        raise usage(f"invalid value '{cut(text)}' for '{flag}': expected a whole number from 1 to {U32_MAX}")
    return value


def parse_cpu_quota(text: str, *, flag: str = "--cpu-quota") -> float:
    """A finite number of cores above 0; Python's ``float()`` alone would also take ``1_0``,
    surrounding whitespace and non-ASCII digits."""
    import math  # only --cpu-quota needs it

    value = float(text) if is_decimal(text) else math.nan
    if not math.isfinite(value) or value <= 0:
        raise usage(f"invalid value '{cut(text)}' for '{flag}': expected a finite number of cores greater than zero")
    return value


def parse_run_id(text: str, *, flag: str = "--run-id") -> str:
    if not is_valid_run_id(text):
        raise usage(
            f"invalid value for '{flag}': a run id has 1 to 256 characters and no control, formatting or undecodable characters"
        )
    return text


def parse_label(text: str, *, flag: str = "--label") -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep:
        raise usage(f"invalid value for '{flag}': expected KEY=VALUE")
    if not is_valid_label_key(key):
        raise usage(f"invalid label key for '{flag}': keys match [A-Za-z_][A-Za-z0-9._-]* and have at most 64 bytes")
    if not is_valid_label_value(value):
        raise usage(f"invalid label value for key '{key}': at most 256 characters, no control or formatting characters")
    return key, value


def parse_env_key(text: str, *, flag: str) -> str:
    problem = env_key_problem(text)
    if problem:
        raise usage(f"invalid value for '{flag}': {problem}")
    return text


def parse_env_assignment(text: str, *, flag: str = "--env") -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep:
        raise usage(f"invalid value for '{flag}': expected KEY=VALUE")
    return parse_env_key(key, flag=flag), value


def parse_pty_size(text: str) -> tuple[int, int]:
    """``COLSxROWS``, each side 1-65535: the terminal size the child's pty gets."""
    sides = split_pty_size(text)
    if sides is None or not all(1 <= int(side) <= PTY_SIDE_MAX for side in sides):
        raise usage(
            f"invalid value '{cut(text)}' for '--pty-size': expected COLSxROWS, each 1-{PTY_SIDE_MAX}, e.g. 80x24"
        )
    return int(sides[0]), int(sides[1])
