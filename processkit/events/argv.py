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


def hint(rendered: list[str] | tuple[str, ...]) -> str | None:
    haystack = _ascii_lower(" ".join(rendered))
    for name, markers in HINT_RULES:
        if all(_ascii_lower(marker) in haystack for marker in markers):
            return name
    return None


def described(argv: tuple[str, ...]) -> tuple[tuple[str, ...], str, str | None]:
    """The argv rendered, its fingerprint and its hint. The last argv's are kept: a run asks
    twice (its registry record, then ``run_started``), and a benchmark's runs share one argv."""
    last_argv, facts = _LAST[0]
    if last_argv == argv and type(argv) is tuple:  # a tuple: what it holds cannot change
        return facts
    rendered = tuple(render(arg) for arg in argv)
    facts = (rendered, fingerprint(argv), hint(rendered))
    _LAST[0] = (argv, facts)  # one store: a thread reading it sees the old pair or the new
    return facts


_LAST: list = [(None, None)]  # (argv, described(argv)) for the last argv described


def command_object(argv: tuple[str, ...], *, raw: bool) -> dict:
    rendered, sha256, found = described(argv)
    return {"redacted": not raw, "argv": list(rendered) if raw else None, "argv_sha256": sha256, "hint": found}
