"""Where the per-user registry lives, and the two ways to open it (docs/control-plane.md §2.1).

A mutating open (``run``) creates the directory and re-asserts mode 0700 every time, which
repairs a widened directory; a read-only open (every client) never creates or changes it, and
a missing directory is simply an empty registry.
"""

from __future__ import annotations

import os
import stat

ENV_DIR = "PROCESSKIT_CLI_REGISTRY_DIR"


class RegistryError(Exception):
    """The registry cannot be located, prepared or read."""


def registry_dir() -> str:
    explicit = os.environ.get(ENV_DIR)
    if explicit:
        return explicit
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return os.path.join(runtime, "processkit-cli", "runs")
    home = os.environ.get("HOME")
    if home:
        return os.path.join(home, ".local", "state", "processkit-cli", "runs")
    raise RegistryError(f"cannot locate the registry: none of {ENV_DIR}, XDG_RUNTIME_DIR or HOME is set")


def open_for_writing() -> str:
    """The registry directory, created if needed and (re)set to 0700."""
    path = registry_dir()
    try:
        os.makedirs(path, 0o700, exist_ok=True)
        os.chmod(path, 0o700)
    except OSError as exc:
        raise RegistryError(f"cannot prepare the registry directory {path}: {exc.strerror or exc}") from None
    return path


def open_for_reading() -> str | None:
    """The registry directory, or None when it does not exist yet."""
    path = registry_dir()
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RegistryError(f"cannot open the registry directory {path}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(mode):
        raise RegistryError(f"cannot open the registry directory {path}: not a directory")
    return path
