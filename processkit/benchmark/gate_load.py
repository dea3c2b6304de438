"""The load beside a gate's runs in its words (``gate.py``): what the others' load, or a CPU
quota, took of the runs' CPUs, on either side (``load_said``), how much slower that can make a
command's wall time (``load_explains``: ``1 / (1 - share)``), and whether a quota held either side
back (``throttled``), said beside any verdict."""

from __future__ import annotations

from .host_load import BUSY_SHARE, Load


def load_said(now: Load | None, then: Load | None) -> str:
    """``the machine was busy (other processes took 95 % of the CPUs' time during these runs, 66 %
    during the baseline's)``; where a CPU quota held the runs back, that too (``; a CPU quota of
    0.2 CPU held the runs back 45 % of the time during these runs``; each side's quota named
    where they differ: ``CPU quotas held the runs back 45 % of the time during these runs (0.2
    CPU), 10 % during the baseline's (0.5 CPU)``), and where no one else's load made the machine
    busy, ``the runs were throttled (a CPU quota ...)`` alone."""
    sides = [(side, when) for side, when in ((now, "these runs"), (then, "the baseline's")) if side is not None]
    others = [(side.others, when) for side, when in sides if side.others is not None]
    held = [(side, when) for side, when in sides if side.noticed()]
    crowded = any(share >= BUSY_SHARE for share, _ in others)
    parts = []
    if others and (crowded or not held):
        said = [
            f"{share * 100:.0f} %" + (" of the CPUs' time" if not index else "") + f" during {when}"
            for index, (share, when) in enumerate(others)
        ]
        parts.append("other processes took " + ", ".join(said))
    if held:
        # in CPU as Kubernetes and docker --cpus count it ("0.5 CPU"): once, or each side's where they differ
        differ = len({side.quota for side, _ in held}) > 1
        said = [
            f"{(side.throttled or 0.0) * 100:.0f} %"
            + (" of the time" if not index else "")
            + f" during {when}"
            + (f" ({side.quota:g} CPU)" if differ and side.quota is not None else "")
            for index, (side, when) in enumerate(held)
        ]
        first = held[0][0].quota
        who = "CPU quotas" if differ else "a CPU quota" + (f" of {first:g} CPU" if first is not None else "")
        parts.append(f"{who} held the runs back " + ", ".join(said))
    head = "the machine was busy" if crowded or not held else "the runs were throttled"
    return f"{head} ({'; '.join(parts)})"


def load_explains(now: Load | None, then: Load | None) -> float:
    """The wall-time slowdown (%) that the others' load can explain: a command given what the
    others left, ``1 - share`` of the machine, takes up to ``1 / (1 - share)`` as long (the
    share taken at most 0.95, so a slowdown beyond 20x is never the load's alone)."""
    share = held(now, then)
    return (1 / (1 - share) - 1) * 100


def held(now: Load | None, then: Load | None) -> float:
    """The larger side's share of the time the runs could not have a CPU (``Load.held``), at most 0.95."""
    return min(max((side.held() for side in (now, then) if side is not None), default=0.0), 0.95)


def throttled(now: Load | None, then: Load | None) -> bool:
    """A CPU quota held either side's runs back (``Load.noticed``): said beside any verdict,
    busy or not, as the wall time it stretched is in the figures."""
    return any(side is not None and side.noticed() for side in (now, then))
