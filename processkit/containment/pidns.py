"""Whether the pid namespace the runner's children are born into has lost its init, asked once
a clone has failed with ENOMEM: that is the kernel's word for a namespace whose first process
has ended (``unshare --pid`` without ``--fork``: every child of the runner is born into a
namespace the runner is not in, and none starts once that first one has gone), and for an
ordinary shortage too. A failure path: a few /proc reads, each bounded (``cgroupfs.read_bytes``)."""

from __future__ import annotations

import os

from .cgroupfs import read_bytes
from .members import status_fields


def children_namespace_ended() -> bool:
    """True only when the runner's children are born into a namespace other than its own (so
    it had an init, the runner's first child there) and none of the runner's children is alive
    as pid 1 in its own namespace; False when that cannot be read (a kernel with no list of
    children): the OS's words are then the ones given."""
    try:
        if os.readlink("/proc/self/ns/pid") == os.readlink("/proc/self/ns/pid_for_children"):
            return False
        listed = [read_bytes(f"/proc/self/task/{task}/children") for task in os.listdir("/proc/self/task")]
    except OSError:
        return False
    for child in b" ".join(listed).split():
        try:
            status = read_bytes(f"/proc/{int(child)}/status")
        except OSError:
            continue  # reaped meanwhile
        fields = status_fields(status, (b"State", b"NSpid"))
        alive = fields.get(b"State", b"").strip()[:1] not in (b"Z", b"X")
        if alive and fields.get(b"NSpid", b"").split()[-1:] == [b"1"]:
            return False
    return True
