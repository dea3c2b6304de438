"""Starting the root child: shell-free, byte-exact argv, joined to its container before exec."""

from __future__ import annotations

import os
import signal
import subprocess

from ..containment import Container, prctl
from ..errors import Failure, Kind
from ..spec import StdinMode


class AttachError(Exception):
    """Joining the container failed inside the child (container_failed phase attach, 102)."""


def _child_setup(container: Container, runner_pid: int):
    def setup() -> None:
        os.setpgid(0, 0)
        container.prepare_child()
        prctl.set_parent_death_signal(signal.SIGKILL)
        if os.getppid() != runner_pid:  # the runner died before the death signal was armed
            os._exit(1)
        # A mask inherited from the runner's caller would block the graceful stop's SIGTERM;
        # the child starts with none, as it would under the reference.
        signal.pthread_sigmask(signal.SIG_SETMASK, ())

    return setup


def spawn(argv, *, env, cwd, container: Container, stdin: StdinMode, pipe_output: bool) -> subprocess.Popen:
    """Start the child; raises a spawn Failure (101) or AttachError (102)."""
    stdin_handle = {StdinMode.NULL: subprocess.DEVNULL, StdinMode.INHERIT: None, StdinMode.FILE: subprocess.PIPE}[stdin]
    output = subprocess.PIPE if pipe_output else None
    try:
        return subprocess.Popen(
            list(argv),
            stdin=stdin_handle,
            stdout=output,
            stderr=output,
            env=env,
            cwd=cwd,
            close_fds=True,
            preexec_fn=_child_setup(container, os.getpid()),
        )
    except subprocess.SubprocessError as exc:
        raise AttachError(f"cannot join the child to the {container.mechanism} container: {exc}") from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if cwd is not None and exc.filename == cwd:
            raise Failure(Kind.SPAWN_ERROR, f"cannot use --cwd {cwd}: {reason}") from None
        raise Failure(Kind.SPAWN_ERROR, f"could not start the program {argv[0]!r}: {reason}") from None
