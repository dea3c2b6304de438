"""``input=`` as the call takes it (``api.streams.Streams``'s): the bytes it holds, and a large
one's memfd, written here so that it travels as a descriptor rather than in the frame."""

from __future__ import annotations

import os

from ..writeall import write_all

INLINE_INPUT = 1 << 20  # an input= larger than this travels as a memfd of its own (``memfd``)


def taken(value, codec: tuple[str, str] | None) -> bytes | memoryview | None:
    """``value``'s bytes: a str encoded by ``codec`` (encoding, errors; None unless the call is in
    text mode), any bytes-like object (an mmap, an array) as subprocess takes them: one over
    ``INLINE_INPUT`` and contiguous as a view of it, written from in place into its ``memfd`` (a
    copy would add its size to the caller's peak), any other copied once (the frame pickles it)."""
    if value is None:
        return None
    if isinstance(value, str):
        if codec is None:
            raise TypeError("input is a str: pass text=True (or encoding=), or give bytes")
        return value.encode(*codec)
    if codec is not None:
        raise TypeError("input must be a str when text=True")
    if isinstance(value, bytes):  # uncopied
        return bytes(value)
    try:
        view = memoryview(value)
    except TypeError:
        raise TypeError(f"input must be a bytes-like object or a str, not {type(value).__name__}") from None
    if view.nbytes > INLINE_INPUT and view.c_contiguous:
        return view.cast("B")
    with view:
        return view.tobytes()


def memfd(data: bytes | memoryview | None) -> int | None:
    """A descriptor of a memfd holding ``data`` when it is over ``INLINE_INPUT`` (the caller closes
    it once sent, the service holding its copy), else None: it then travels in the frame, as it
    does where this process cannot hold it so: no memfd here (EMFILE; ENOSYS or EPERM under a
    seccomp filter), no room for it, or its ``ulimit -f`` under the input's size (a write past it
    raises SIGXFSZ, which kills a process that has not ignored it: never written, the service's
    own write then says what it can, a 111 ``cannot hold the N-byte input``, never a cut input)."""
    if data is None or len(data) <= INLINE_INPUT:
        return None
    import resource  # for a large input only: every call would pay its import

    most = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if most != resource.RLIM_INFINITY and most < len(data):
        return None
    fd = -1
    try:
        fd = os.memfd_create("processkit-input", os.MFD_CLOEXEC)
        write_all(fd, data)
    except OSError:  # no memfd here, or no room: the frame carries it
        _close_made(fd)
        return None
    except BaseException:  # an interruption (Ctrl-C): nothing was sent
        _close_made(fd)
        raise
    return fd


def _close_made(fd: int) -> None:
    """``memfd``'s descriptor closed, when it was made."""
    if fd >= 0:
        os.close(fd)
