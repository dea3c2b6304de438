"""JSON values as JSON Schema (draft 2020-12) reads them: which are numbers, when two are equal,
the JSON Pointer of a member, and a ``pattern`` compiled with ECMA-262 meaning.

Apart from the validator (``events/validate.py``), which walks a schema's keywords over an
instance: these are the meanings of JSON itself that its checks compare and report with.
"""

from __future__ import annotations

import re


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def json_equal(a, b) -> bool:
    """Equality as JSON sees it: ``true`` is not ``1``, ``1`` is ``1.0``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if is_number(a) and is_number(b):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def child_path(path: str, key) -> str:
    """The JSON Pointer (RFC 6901) of ``key`` inside the value at ``path``."""
    token = str(key)
    if "~" in token or "/" in token:
        token = token.replace("~", "~0").replace("/", "~1")
    return f"{path}/{token}"


def ecma_pattern(pattern: str) -> re.Pattern:
    """``pattern`` compiled with ECMA-262 meaning, as JSON Schema defines ``pattern``.

    Two Python habits differ: ``$`` also matches before a final newline (ECMA's only at the
    very end: ``\\Z`` here), and ``\\d``/``\\w`` match any Unicode digit or letter (ECMA's
    only ASCII: ``re.ASCII``). A ``$`` inside a character class or escaped stays literal.
    """
    if not isinstance(pattern, str):
        raise TypeError("a pattern must be a string")
    out: list[str] = []
    escaped = in_class = False
    for ch in pattern:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "$":
            out.append(r"\Z")
            continue
        out.append(ch)
    return re.compile("".join(out), re.ASCII)
