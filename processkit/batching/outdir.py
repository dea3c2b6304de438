"""The batch's output directory and its jobs' directories, made so another user cannot steer
them: a directory is made (or found) without following a link, and used only when this user
owns it and no one else may write to it."""

from __future__ import annotations

import os
import stat

from ..errors import Failure, Kind


def ensure_directory(path: str, what: str) -> str:
    """``path`` as a directory this user owns and alone may write; made when missing."""
    try:
        os.mkdir(path, 0o755)
    except FileExistsError:
        pass
    except OSError as exc:
        raise Failure(Kind.SETUP, f"cannot create {what} {path}: {exc.strerror}") from None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise Failure(Kind.SETUP, f"cannot use {what} {path}: {exc.strerror} (a link is never followed)") from None
    try:
        facts = os.fstat(fd)
    finally:
        os.close(fd)
    if facts.st_uid != os.geteuid():
        raise Failure(Kind.SETUP, f"cannot use {what} {path}: it belongs to another user")
    if facts.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise Failure(Kind.SETUP, f"cannot use {what} {path}: others may write to it")
    return path
