"""Whether a CPU quota held the runs back: the cgroup ``cpu`` controller's throttling of the
groups the runs' groups are made in and of every group above them, read as the benchmark
begins and as it ends, so the gate (``gate.py``) can tell a slower command from a throttled one.

A quota (cgroup v2 ``cpu.max``, as ``docker --cpus=1`` or systemd's ``CPUQuota=`` set it; v1
``cpu.cfs_quota_us``) on the runner's group or an ancestor stops every task below it once the
group used its quota for the period: the runs wait, the host's CPUs look idle
(``host_load.py`` reads no one else's load), and a CPU-bound command's wall time stretches
while its CPU time does not. The kernel counts it in the quota's group's ``cpu.stat``:
``throttled_usec`` (v2, with the controller enabled) or ``throttled_time`` (v1, ns), the time
the group's tasks were held back (per CPU they were held on). The group held back longest over
the benchmark's wall time is the throttled share: 0.0 where no quota bit. Under a quota of ``q``
CPUs a single-threaded CPU-bound command is held back ``1 - q`` of its own run, but the share
is read over the whole benchmark, the gaps between runs too, and reads lower (0.65 under 0.1
CPU, where gzip's runs took ten times as long: ``host_load.Load.held`` allows for that). The runs' groups are made below
``bench``'s own (v2: the parent ``cgroup_v2.find_parent`` names, v1: ``own_groups``), so their
ancestors are read; a run's own group carries no quota (``bench`` sets no caps). An
ancestor's count is its whole subtree's: a container's other processes held back while no run
was runnable count too, so the share may be more than the runs lost. Two reads of a
few small files per benchmark, none per run.
"""

from __future__ import annotations

import os

from ..containment import cgroup_v1, cgroup_v2, cgroupfs


def groups() -> list[str]:
    """The directories of the groups whose quota applies to the runs, nearest first: the v2
    parent of the runs' groups and this process's own v2 group (where a run falls back to),
    the v1 ``cpu`` group, and each one's ancestors up to its hierarchy's root (the last directory
    with a ``cpu.stat``)."""
    found: list[str] = []
    for start in (cgroup_v2.find_parent(), cgroup_v2.own_group()[1], cgroup_v1.own_groups().get("cpu")):
        path = start
        while path and path not in found and os.path.exists(os.path.join(path, "cpu.stat")):
            found.append(path)
            path = os.path.dirname(path)
    return found


def read(paths: list[str]) -> dict[str, tuple[int, float | None]]:
    """Each group's time held back so far (ns) and its quota in CPUs (None: none), for the
    groups whose ``cpu.stat`` counts throttling (a v2 group without the controller does not)."""
    held: dict[str, tuple[int, float | None]] = {}
    for path in paths:
        try:
            stat = cgroupfs.read_keyed(os.path.join(path, "cpu.stat"))
            if "throttled_usec" in stat:
                held[path] = (stat["throttled_usec"] * 1000, _quota(path, "cpu.max"))
            elif "throttled_time" in stat:
                held[path] = (stat["throttled_time"], _quota(path, "cpu.cfs_quota_us"))
        except (OSError, ValueError):
            continue  # a group gone, or a file this kernel lacks: it is not counted
    return held


def _quota(path: str, name: str) -> float | None:
    """``cpu.max``'s ``QUOTA PERIOD`` (``max``: none), or v1's quota (-1: none) over its period."""
    if name == "cpu.max":
        quota, _, period = cgroupfs.read_text(os.path.join(path, name)).strip().partition(" ")
    else:
        quota, period = (cgroupfs.read_text(os.path.join(path, file)).strip() for file in (name, "cpu.cfs_period_us"))
    if quota == "max" or int(quota) < 0 or int(period) <= 0:
        return None
    return int(quota) / int(period)


def held_back(
    since: dict[str, tuple[int, float | None]], now: dict, seconds_ns: int
) -> tuple[float | None, float | None]:
    """``(throttled_share, cpu_quota)`` between two ``read``s ``seconds_ns`` apart: the longest
    time a group read both times was held back, as a share of that time (0 to 1; None where no
    group was read both times), and the smallest quota among them (CPUs; None: no quota)."""
    counted = since.keys() & now.keys()
    if not counted:
        return None, None
    held = max((now[path][0] - since[path][0] for path in counted), default=0)
    quotas = [now[path][1] for path in counted if now[path][1] is not None]
    share = min(max(held / seconds_ns, 0.0), 1.0) if seconds_ns > 0 else 0.0
    return round(share, 3), (round(min(quotas), 3) if quotas else None)
