"""The redaction-aware ``command`` object of ``run_started``: fingerprint, hint, raw argv."""

from __future__ import annotations

import os

from .. import native

# (hint, markers): the first rule whose markers all occur in the rendered argv wins.
HINT_RULES = (("msbuild_node_reuse", ("MSBuild.dll", "/nodemode:1", "/nodeReuse:true")),)


def fingerprint(argv) -> str:
    """SHA-256 over each element's raw bytes joined by a single NUL."""
    return native.sha256_hex(b"\0".join(os.fsencode(arg) for arg in argv))


def render(arg: str) -> str:
    """Valid UTF-8 without NUL passes verbatim; anything else gets the escaped form."""
    raw = os.fsencode(arg)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and "\0" not in text:
        return text
    out = ["\0"]
    for ch in raw.decode("utf-8", "surrogateescape"):
        point = ord(ch)
        if 0xDC80 <= point <= 0xDCFF:
            out.append(f"\\x{point - 0xDC00:02x}")
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\0":
            out.append("\\x00")
        else:
            out.append(ch)
    return "".join(out)


def _ascii_lower(text: str) -> str:
    return text.translate(_ASCII_LOWER)


_ASCII_LOWER = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}


def hint(rendered: list[str]) -> str | None:
    haystack = _ascii_lower(" ".join(rendered))
    for name, markers in HINT_RULES:
        if all(_ascii_lower(marker) in haystack for marker in markers):
            return name
    return None


def command_object(argv, *, raw: bool) -> dict:
    rendered = [render(arg) for arg in argv]
    return {
        "redacted": not raw,
        "argv": rendered if raw else None,
        "argv_sha256": fingerprint(argv),
        "hint": hint(rendered),
    }
