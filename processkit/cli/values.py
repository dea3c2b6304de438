"""Value grammars shared by every subcommand; each parser raises a usage Failure on bad input."""

from __future__ import annotations

import math
import re

from ..errors import usage
from ..spec import U32_MAX, U64_MAX
from ..text import env_key_problem, is_valid_label_key, is_valid_label_value, is_valid_run_id

_DURATION = re.compile(r"[0-9]+(ms|s|m|h)?")
_DURATION_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, None: 1000}
_SIZE = re.compile(r"[0-9]+([bkmg])?", re.IGNORECASE | re.ASCII)  # ASCII: the Kelvin sign is no "k"
_COUNT = re.compile(r"\+?[0-9]+")  # Rust's unsigned integer syntax: a "+" is allowed
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")  # Rust's f64, minus inf/nan
_SIZE_FACTOR = {None: 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_PTY_SIZE = re.compile(r"([0-9]{1,5})x([0-9]{1,5})", re.ASCII)
PTY_SIDE_MAX = 65535  # the kernel's struct winsize holds each side in 16 bits


def parse_duration_ms(text: str, *, positive: bool, flag: str) -> int:
    """``^[0-9]+(ms|s|m|h)?$``; a bare number is seconds."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise usage(f"invalid value '{text}' for '{flag}': expected a whole number with an optional unit ms, s, m or h")
    digits = text[: match.start(1)] if match.group(1) else text
    total = int(digits) * _DURATION_MS[match.group(1)]
    if total > U64_MAX:
        raise usage(f"invalid value '{text}' for '{flag}': duration is too large")
    if positive and total == 0:
        raise usage(f"invalid value '{text}' for '{flag}': duration must be greater than zero")
    return total


def parse_size(text: str, *, flag: str) -> int:
    """``^[0-9]+[bkmg]?$`` in binary units; zero is rejected."""
    match = _SIZE.fullmatch(text)
    if match is None:
        raise usage(
            f"invalid value '{text}' for '{flag}': expected a whole number with an optional suffix b, k, m or g"
        )
    suffix = match.group(1).lower() if match.group(1) else None
    digits = text[:-1] if suffix else text
    total = int(digits) * _SIZE_FACTOR[suffix]
    if total == 0:
        raise usage(f"invalid value '{text}' for '{flag}': size must be greater than zero")
    if total > U64_MAX:
        raise usage(f"invalid value '{text}' for '{flag}': size is too large")
    return total


def parse_max_processes(text: str, *, flag: str = "--max-processes") -> int:
    """A u32 of at least 1."""
    if not _COUNT.fullmatch(text) or not 1 <= int(text) <= U32_MAX:
        raise usage(f"invalid value '{text}' for '{flag}': expected a whole number from 1 to {U32_MAX}")
    return int(text)


def parse_cpu_quota(text: str, *, flag: str = "--cpu-quota") -> float:
    """A finite number of cores above 0; Python's ``float()`` alone would also take ``1_0``,
    surrounding whitespace and non-ASCII digits."""
    value = float(text) if _DECIMAL.fullmatch(text) else math.nan
    if not math.isfinite(value) or value <= 0:
        raise usage(f"invalid value '{text}' for '{flag}': expected a finite number of cores greater than zero")
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
    match = _PTY_SIZE.fullmatch(text)
    if match is None or not all(1 <= int(side) <= PTY_SIDE_MAX for side in match.groups()):
        raise usage(f"invalid value '{text}' for '--pty-size': expected COLSxROWS, each 1-{PTY_SIDE_MAX}, e.g. 80x24")
    return int(match[1]), int(match[2])
