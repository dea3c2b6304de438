"""``subprocess.check_output`` and ``check_call`` for code that moves from subprocess: each a
``run`` with ``check=True``, shaped as subprocess's (what it returns, what it refuses)."""

from __future__ import annotations

import subprocess

from .launch import completed


def check_output(args, *, echo: bool = False, **options):
    """The child's stdout (bytes, or str in text mode), as ``subprocess.check_output``; a code
    other than 0 raises ``RunError`` (a ``CalledProcessError``) holding it as ``output``."""
    if "stdout" in options:  # subprocess's refusal, in its words
        raise ValueError("stdout argument not allowed, it will be overridden")
    if "check" in options:  # subprocess's refusal; check_call's is Popen's TypeError, as here
        raise ValueError("check argument not allowed, it will be overridden")
    if options.get("capture_output"):  # subprocess's refusal beside its own stdout=PIPE; False is taken
        raise ValueError("stdout and stderr arguments may not be used with capture_output")
    if options.get("input", 0) is None and "stdin" in options:  # subprocess's empty input for None, refused
        raise ValueError("stdin and input arguments may not both be used")
    options["stdout"] = subprocess.PIPE
    return completed(args, options, check=True, echo=echo, function="check_output").stdout


def check_call(args, *, echo: bool = False, **options) -> int:
    """0, as ``subprocess.check_call``; a code other than 0 raises ``RunError``."""
    completed(args, options, check=True, echo=echo, function="check_call")
    return 0
