"""The ``setpriv`` prefixes tests run a command under: as another user, or as root bound by file
modes as any other user is."""

from __future__ import annotations

import os


def as_user(user) -> list[str]:
    """Run as ``user`` (a ``pwd`` entry): its uid, its group and its supplementary groups."""
    return ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups"]


def without_file_override() -> list[str]:
    """Run as root without its override of file modes (``CAP_DAC_OVERRIDE``,
    ``CAP_DAC_READ_SEARCH``), as any other user runs; nothing to drop for another user."""
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search"] if os.geteuid() == 0 else []
