"""The gate's off-CPU rule (``gate.decide``): a command that now waits longer (a sleep, I/O, a
lock) regressed, however much CPU others took, where both sides' runs were given one CPU.

A run's off-CPU time is its wall time less its tree's CPU time and the time its tree waited for
a CPU (``measured.off_cpu``: its cgroup v2 group's ``cpu.pressure``): what is left is time
spent asleep or blocked, which others' CPU load does not lengthen (their I/O and memory
pressure do: a disk or a page cache others keep busy slows a command's own I/O). The kernel
weights each CPU's share of a group's wait by the time the group kept that CPU busy, in whole
jiffies, so the wait is the sum of the tree's waits only where all of it ran on one CPU, and
then to a jiffy (a period in which the group kept the CPU busy for less than one weighs 0); a
tree free to move between CPUs reads a fraction of its wait, and so off-CPU time it never had
(bench/README.md: 445-987 ms for a command that never slept, beside load on two CPUs). So the
rule is judged only where both exports' ``host_load.affinity_cpus`` is 1 (``--cpus`` naming
one, or ``bench`` started with a one-CPU affinity): it assumes the tree stays there, which a
command that widens its own affinity (``taskset``) breaks. Time a hypervisor stole from the CPU
(a KVM guest's ``steal``) is neither the tree's CPU time nor its wait, so a neighbour's steal
reads as off-CPU time: where either side's ``host_load.steal_share`` is above ``NOTICED`` (0.5 %
of the CPU's time), the rule is not judged. Interrupt time the kernel accounts apart
(``CONFIG_IRQ_TIME_ACCOUNTING``) is likewise neither, and is not told apart: a device's
interrupts on the runs' CPU read as off-CPU time. Elsewhere, and where either side lacks the
figure (cgroup v1, a process group, a run the engine carried, an exit the kernel did not time,
an older export, hyperfine's), the gate is as before.

A growth counts when it is significant (Mann-Whitney U over the runs' off-CPU times), by more
than ``FLOOR_SECONDS`` between the medians, and beyond the threshold as a share of the
baseline's own time (``_own``: its runs' CPU time and off-CPU time, its wait for a CPU left
out): the slowdown the longer wait alone makes on a CPU of its own, which the load that
stretched the baseline's wall time does not shrink.
"""

from __future__ import annotations

from .baseline import shown_change
from .host_load import NOTICED
from .stats import SIGNIFICANCE, mann_whitney, median

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .host_load import Load

# Seconds the off-CPU median must grow by: on one CPU it read exact to 3 ms (its CPU figure holds
# the group's joining and exit work, outside the timed interval), so less is not a wait added.
FLOOR_SECONDS = 0.003
FIGURE = "off_cpu"
HOW = "wall time less CPU time and the wait for a CPU, which others' CPU load does not lengthen"


def judged(now: Load | None, then: Load | None) -> bool:
    """Whether both sides' runs were given one CPU, where the wait read is whole, and no
    hypervisor stole a noticeable share of it."""
    return all(
        side is not None and side.affinity == 1 and side.steal is not None and side.steal <= NOTICED
        for side in (now, then)
    )


def untold(now: Load | None, then: Load | None, one_cpu: str) -> str | None:
    """Words for a busy gate whose runs had more than one CPU on a side: there a longer wait
    reads as the load's (``passed`` by CPU time, ``inconclusive`` by wall time), and the gate says
    it could not tell them apart rather than let that read as a check made; None elsewhere (an
    affinity not recorded: the figure's absence, not the CPUs, left the rule out)."""
    if now is None or then is None or now.affinity is None or then.affinity is None:
        return None
    wide = max(now.affinity, then.affinity)
    if wide <= 1:
        return None
    return (
        f"; on {wide} CPUs it could not tell a longer wait (sleep, I/O, a lock) from a longer wait for a CPU: "
        "a group's cpu.pressure counts part of the wait of a tree that moves between CPUs, so the off-CPU time was "
        f"not judged ({one_cpu} naming one CPU has it judged)"
    )


def grown(new, old, now: Load | None, then: Load | None, threshold: float, flag: str) -> tuple | None:
    """(change %, p-value, reason) where ``new``'s off-CPU time grew beyond ``threshold`` % of
    ``old``'s own time (``_own``), significantly and by more than the floor; else None."""
    off, old_off = new.off_cpu_times or [], old.off_cpu_times or []
    own = _own(old) if old_off else 0.0
    if not off or not old_off or not judged(now, then) or own <= 0:
        return None
    p_value = mann_whitney(off, old_off)
    grew = median(off) - median(old_off)
    change = grew / own * 100
    if p_value is None or p_value >= SIGNIFICANCE or grew <= FLOOR_SECONDS or change <= threshold:
        return None
    reason = (
        f"by the off-CPU time ({HOW}; Mann-Whitney U p = {p_value:.2g}): its median grew by {grew * 1e3:.3g} ms "
        f"({median(off) * 1e3:.3g} ms against the baseline's {median(old_off) * 1e3:.3g} ms), "
        f"{shown_change(change)} % of the baseline's own time ({own * 1e3:.3g} ms: its median wall time less its wait "
        "for a CPU), "
        f"beyond {flag} %: it waits longer (sleep, I/O, a lock)"
    )
    return change, p_value, reason


def _own(old) -> float:
    """The baseline's median run time less its wait for a CPU: its CPU time and off-CPU time per
    run (the shell's start-up taken off the first, not the second: a fraction of a millisecond);
    0.0 where its CPU time is not recorded (a crafted export's: bench's runs with off-CPU time have it)."""
    cpu = old.cpu_times or []
    return median([a + b for a, b in zip(cpu, old.off_cpu_times)]) if cpu else 0.0
