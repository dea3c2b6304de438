"""Compact JSON text, as ``json.dumps(value, ensure_ascii=False, separators=(",", ":"))`` gives it.

Facts about start-up that shape this module: importing the ``json`` package costs a plain run
about a sixth of its start-up, because ``json.decoder`` and ``json.encoder`` import ``re`` (and
``re`` imports ``enum``). Writing an event or a registry record needs neither: ``json.dumps``
with these options hands the whole value to ``_json.make_encoder``, the C encoder in CPython's
own ``_json`` module. This module calls that same encoder with the same arguments, so the
text is the same, byte for byte (tests/test_startup_imports.py proves it against ``json.dumps``);
where ``_json`` is missing (another interpreter), it is ``json.dumps`` itself.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable


def _not_serializable(value: object) -> object:
    """``JSONEncoder.default``'s refusal, word for word."""
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def _c_dumps() -> Callable[[Any], str] | None:
    try:
        from _json import encode_basestring, make_encoder
    except ImportError:
        return None

    def encoder() -> Callable[[Any, int], Any]:
        """The encoder json.dumps builds for these options, with a fresh markers dict (the ids
        of the containers being encoded, so circular values are refused)."""
        return make_encoder({}, _not_serializable, encode_basestring, None, ":", ",", False, False, True)

    try:
        spare = [encoder()]  # an interpreter whose C encoder takes other arguments refuses them here
    except TypeError:
        return None

    def dumps(value: Any) -> str:
        if isinstance(value, str):  # as JSONEncoder.encode: a bare string skips the encoder
            return encode_basestring(value)
        # An encoder that finished leaves its markers empty, as a fresh one's, so it is used
        # again (json.dumps builds one per call, a third of a small line's cost). One that
        # raised may keep the failed value's markers: it is not put back. Taken from ``spare``
        # while in use, so another thread never shares its markers.
        try:
            encode = spare.pop()
        except IndexError:
            encode = encoder()
        text = "".join(encode(value, 0))
        spare.append(encode)
        return text

    return dumps


def _json_dumps(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


dumps: Callable[[Any], str] = _c_dumps() or _json_dumps


def lossy_utf8(text: str) -> bytes:
    """``text`` as UTF-8 where it may hold bytes that were not (an argument's, a path's, as Python
    holds them: U+DC80..U+DCFF): those bytes rendered as ``String::from_utf8_lossy`` renders them
    (the reference's rule: each maximal run that is no UTF-8 sequence's start, one U+FFFD), and a
    surrogate that stands for no byte (JSON's ``\\ud800``) one U+FFFD each. Never an error: the
    events stream, a page and an export are for reading."""
    try:
        return text.encode("utf-8")  # no surrogate in it: the same bytes as the lossy rendering
    except UnicodeEncodeError:
        pass
    import re  # only for text that held such a byte

    bytes_only = re.sub("[\ud800-\udc7f\udd00-\udfff]", "\ufffd", text)
    return bytes_only.encode("utf-8", "surrogateescape").decode("utf-8", "replace").encode("utf-8")
