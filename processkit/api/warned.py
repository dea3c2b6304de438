"""A warning the API gives, pointed at its caller's line: the first frame outside this package,
however deep the call that found it (``run``, a ``start``ed handle's ``wait``, an awaited
``run_async``), and outside asyncio's own frames that drive a coroutine (``asyncio.run(run_async(...))``
has no frame of the caller's between them: the warning pointed into ``asyncio/events.py``). A fixed
``stacklevel`` was right for one of them only; ``warnings``' ``skip_file_prefixes`` does this from
Python 3.12, and the project runs from 3.10.

Each warning carries what its call returns (``result``): raised as an error (``-W error``,
pytest's ``filterwarnings = error``) it is the only way out of the call, and the caller catching
it still has the finished run's result or the batch's lines."""

from __future__ import annotations

import os
import sys
import warnings
from types import FrameType

from ..callwarning import CallWarning

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def warn(text: str, category: type[CallWarning], result: object) -> None:
    """``warnings.warn`` at the first frame that is neither processkit's nor asyncio's, the
    warning holding ``result``."""
    skipped = (_PACKAGE, *_asyncio())
    level = 2  # stacklevel 2: this function's caller
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(skipped):
        frame, level = frame.f_back, level + 1
    said = category(text)
    said.result = result
    warnings.warn(said, stacklevel=level)


def _asyncio() -> tuple[str, ...]:
    """asyncio's directory, where it is loaded (else none of its frames can be on the stack)."""
    loaded = sys.modules.get("asyncio")
    found = getattr(loaded, "__file__", None)
    return (os.path.dirname(os.path.abspath(found)) + os.sep,) if found else ()
