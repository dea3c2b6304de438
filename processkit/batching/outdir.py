"""The batch's output directory and its jobs' directories, made so another user cannot steer
them. ``--out`` is walked by ``safepath`` (never through a link at its end, only through
directories no one else can change, owned by this user); a job's directory is then made inside
it, where no one else can plant anything, and checked again as it is used."""

from __future__ import annotations

import os
import stat

from ..errors import Failure, Kind
from ..safepath import private_directory


def prepare_out(path: str) -> str:
    """``path`` as this user's own directory on a path no one else can change; made when missing."""
    try:
        fd = private_directory(path, create=True, mode=0o755)
    except OSError as exc:
        raise Failure(
            Kind.SETUP, f"cannot use --out {path}: {exc.strerror or exc} (a link is never followed)"
        ) from None
    assert fd is not None, "made when missing"
    try:
        _check_private(os.fstat(fd), path, "--out")
    finally:
        os.close(fd)
    return path


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
        _check_private(os.fstat(fd), path, what)
    finally:
        os.close(fd)
    return path


def _check_private(facts: os.stat_result, path: str, what: str) -> None:
    if facts.st_uid != os.geteuid():
        raise Failure(Kind.SETUP, f"cannot use {what} {path}: it belongs to another user")
    if facts.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise Failure(Kind.SETUP, f"cannot use {what} {path}: others may write to it")
