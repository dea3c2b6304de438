"""The value grammars every describer of a run (and every subcommand) reads values with.

One grammar per concept: a count, a duration, a size, a number of cores, a run id, a label, an
environment key, a terminal size, and the text rule for what a run is given as text. Each parser
takes ``name``, the option as the caller spells it (``--timeout`` on the command line,
``timeout=`` in the API, ``timeout`` on a manifest line), and raises a usage ``Failure`` naming
it. A typed caller may give a count, a size or a duration as a number instead of text (a
duration's number is seconds); ``bool`` is no number here, the callers refuse it first.

The grammars are checked with str methods, not regular expressions: ``re`` costs a plain run
more than its own work at start-up. tests/test_value_grammars.py holds each grammar's regular
expression and proves the checks here accept exactly what it accepts, with the same parts.
"""

from __future__ import annotations

from ..errors import usage
from ..spec import U64_MAX
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
    """``\\+?[0-9]+``: Rust's unsigned integer syntax (a "+" allowed); no ``_``, no other
    script's digit, no superscript, no surrounding space, which ``int()`` would all take."""
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


def _shown(value: str | float) -> str:
    """A refused value as a message quotes it: text cut to its first characters, a number by its
    repr (an int of thousands of digits by its size: ``str()`` of one raises)."""
    if isinstance(value, str):
        return f"'{cut(value)}'"
    if isinstance(value, int) and value.bit_length() > 64:
        return f"(an int of {value.bit_length()} bits)"
    return repr(value)


def parse_count(value: str | int, name: str, *, low: int = 0, high: int = U64_MAX) -> int:
    """THE count grammar: ``\\+?[0-9]+`` (``is_count``) from ``low`` to ``high``, or an int."""
    if isinstance(value, str):
        count = bounded_int(value.removeprefix("+"), high) if is_count(value) else None
    else:
        count = value if low <= value <= high else None
    if count is None or count < low:
        raise usage(f"invalid value {_shown(value)} for '{name}': expected a whole number from {low} to {high}")
    return count


def parse_duration_ms(value: str | float, name: str, *, positive: bool) -> int:
    """THE duration grammar, in whole milliseconds: ``[0-9]+(ms|s|m|h)?`` (a bare number is
    seconds), or a finite, non-negative number of seconds (the API's and a manifest's own form, a
    float rounded to the nearest millisecond); zero only when not ``positive``."""
    if isinstance(value, str):
        total = _scaled(value, name, split_duration, _DURATION_MS, "unit ms, s, m or h")
    elif not value >= 0:  # negative, or nan
        said = "negative" if value < 0 else "nan"
        raise usage(f"invalid value {_shown(value)} for '{name}': expected a finite number of seconds, not {said}")
    elif isinstance(value, int):
        total = value * 1000
    else:
        milliseconds = value * 1000
        total = round(milliseconds) if milliseconds < float("inf") else U64_MAX + 1
    if total > U64_MAX:
        raise usage(f"invalid value {_shown(value)} for '{name}': duration is too large")
    if positive and total == 0:
        rounded = isinstance(value, float) and value > 0  # round() made it 0: 0.0005 is, 0.0006 is 1ms
        said = "rounds to 0ms (a duration is counted in whole milliseconds)" if rounded else "must be greater than zero"
        raise usage(f"invalid value {_shown(value)} for '{name}': duration {said}")
    return total


def _scaled(value: str, name: str, split, factors: dict, unit: str) -> int:
    """Digits times their unit's factor (past U64_MAX: U64_MAX + 1, for the caller's bound);
    a text ``split`` cannot part into digits and a known unit is refused, naming the ``unit``s."""
    parts = split(value)
    if parts is None:
        raise usage(f"invalid value {_shown(value)} for '{name}': expected a whole number with an optional {unit}")
    digits, suffix = parts
    count = bounded_int(digits, U64_MAX)
    return U64_MAX + 1 if count is None else count * factors[suffix]


def parse_size(value: str | int, name: str) -> int:
    """THE size grammar, in bytes: ``[0-9]+[bkmg]?`` in binary units (any case), or an int;
    zero is refused."""
    if isinstance(value, str):
        total = _scaled(value, name, split_size, _SIZE_FACTOR, "suffix b, k, m or g")
    else:
        total = value
    if total <= 0:
        raise usage(f"invalid value {_shown(value)} for '{name}': size must be greater than zero")
    if total > U64_MAX:
        raise usage(f"invalid value {_shown(value)} for '{name}': size is too large")
    return total


def parse_cpu_quota(value: str | float, name: str = "--cpu-quota") -> float:
    """A finite number of cores above 0; Python's ``float()`` alone would also take ``1_0``,
    surrounding whitespace and non-ASCII digits."""
    import math  # only --cpu-quota needs it

    if isinstance(value, str):
        cores = float(value) if is_decimal(value) else math.nan
    else:
        cores = float(value) if not isinstance(value, int) or value.bit_length() <= 1024 else math.inf
    if not math.isfinite(cores) or cores <= 0:
        raise usage(f"invalid value {_shown(value)} for '{name}': expected a finite number of cores greater than zero")
    return cores


def parse_choice(text: str, choices: tuple[str, ...], name: str) -> str:
    """One of ``choices`` (the CLI's argparse refuses the others before this is reached)."""
    if text not in choices:
        raise usage(f"invalid value {_shown(text)} for '{name}': expected {', '.join(choices[:-1])} or {choices[-1]}")
    return text


def parse_run_id(text: str, name: str = "--run-id") -> str:
    if not is_valid_run_id(text):
        raise usage(
            f"invalid value for '{name}': a run id has 1 to 256 characters and no control, formatting or undecodable characters"
        )
    return text


def parse_label(text: str, name: str = "--label") -> tuple[str, str]:
    """``KEY=VALUE``."""
    key, sep, value = text.partition("=")
    if not sep:
        raise usage(f"invalid value for '{name}': expected KEY=VALUE")
    return check_label(key, value, name)


def check_label(key: str, value: str, name: str) -> tuple[str, str]:
    """A label's key and value, given apart (a mapping's item) or split from ``KEY=VALUE``."""
    if not is_valid_label_key(key):
        raise usage(f"invalid label key for '{name}': keys match [A-Za-z_][A-Za-z0-9._-]* and have at most 64 bytes")
    if not is_valid_label_value(value):
        raise usage(f"invalid label value for key '{key}': at most 256 characters, no control or formatting characters")
    return key, value


def parse_env_key(text: str, name: str) -> str:
    problem = env_key_problem(text)
    if problem:
        raise usage(f"invalid value for '{name}': {problem}")
    return text


def parse_bare_env_key(text: str, name: str) -> str:
    """A flag that names a variable alone (``--run-id-env``, ``--env-remove``): a ``KEY=VALUE``
    there is said as the shape mistake it is, as the reference says it, and its value is not
    repeated (it may be a secret)."""
    if "=" in text:
        raise usage(f"invalid value for '{name}': expected a bare KEY, not KEY=VALUE")
    return parse_env_key(text, name)


def parse_env_assignment(text: str, name: str = "--env") -> tuple[str, str]:
    """``KEY=VALUE``."""
    key, sep, value = text.partition("=")
    if not sep:
        raise usage(f"invalid value for '{name}': expected KEY=VALUE")
    return parse_env_key(key, name), value


def parse_pty_size(text: str, name: str = "--pty-size") -> tuple[int, int]:
    """``COLSxROWS``, each side 1-65535: the terminal size the child's pty gets."""
    sides = split_pty_size(text)
    if sides is None or not all(1 <= int(side) <= PTY_SIDE_MAX for side in sides):
        raise usage(f"invalid value {_shown(text)} for '{name}': expected COLSxROWS, each 1-{PTY_SIDE_MAX}, e.g. 80x24")
    return int(sides[0]), int(sides[1])


def text_problem(text: str) -> str | None:
    """THE text rule for what a run is given as text (JSON's strings, the API's str): what in
    ``text`` no argument, environment entry, label or path can carry, in words, else None. A NUL
    ends the string execve is given; a lone surrogate (``"\\udc80"`` as much as ``"\\ud800"``)
    is no text. Bytes the OS gave (the command line's, the API's bytes) are not text: their
    undecodable bytes arrive as U+DC80-U+DCFF (``surrogateescape``) and only NUL is refused
    there (``text.uncarried``)."""
    if "\0" in text:
        return f"a NUL character (at offset {text.index(chr(0))})"
    if text.isascii():
        return None  # no surrogate is ASCII: the common case skips the scan
    for ch in text:
        if "\ud800" <= ch <= "\udfff":
            return f"a lone surrogate ({ch!a})"
    return None


def checked_text(text: str, what: str) -> str:
    """``text`` when the text rule takes it, else a usage Failure saying ``what`` holds."""
    problem = text_problem(text)
    if problem is not None:
        carried = (
            "no argument, environment or path can carry"
            if "\0" in text
            else "is no text (an undecoded byte goes as bytes)"
        )
        raise usage(f"{what} holds {problem}, which {carried}")
    return text
