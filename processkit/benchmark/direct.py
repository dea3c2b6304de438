"""A command's sample without the engine's run path (``runner.steps``): the same containment,
spawn, reaping, endings and figures, through their own functions, with none of the per-run
machinery a one-run-at-a-time benchmark does not use (the run's events, its scheduler turns,
the race's generator, the teardown's and release's step lists).

Which samples take it (``takes``): a command's run (not a setup, prepare, conclude or cleanup
step, nor the shell's calibration) whose stream is not kept (no ``--jsonl-dir``), whose output
is ``null``, ``pipe`` or a FILE (not ``inherit`` nor ``--show-output``: the engine's echo),
whose stdin is /dev/null (``--input`` is fed by the engine's relay), on a host that lodges its
runs (the CLI's ``bench``), in a session that could read its working directory (else each run
reports that as the engine does), published late (its context's ``publish_after_ms``: the
driver's for a stream not kept). Every other run goes through the engine, as does every run with
``PROCESSKIT_BENCH_PATH=engine`` in the environment (a switch for the test suite, which runs
each case both ways: docs/bench.md's internals).

A sample here, in order: a stop caught before it starts no child (the engine's words); the
host's lodging slot and ``containment.create``; the spawn (``spawn.begin`` with the session's
linger, under the caller's umask and limits); the exec's report, waited for as the engine's
(``Host.exec_waited``); the root given to the host's reaper
(``Reaper.watch``, at once collected where the linger saw it exit); then the host's loop turned
until an ending is recorded: the root's exit, a stop signal (the host's watch), ``--timeout``,
or a control-plane ``cancel``/``kill``; the run is published for ``list``, ``inspect`` and
``cancel`` once its child has run the context's ``publish_after_ms`` (``spec.LATE_PUBLICATION_MS``),
as the engine publishes a bench run, and not once its ending is decided (its timers cancelled
then, as the engine's). The ending is reported by the engine's table (``ENDING_REPORTS``: same codes and words);
the tree is read, its figures taken, and it is ended by the engine's teardown decisions
(``engine/tree_end.py``, its waits turned here by ``waits.carried``: SIGTERM first for a
graceful ending, a control ``kill`` during its grace ending the grace at once, the gone rule,
the kill, a root that left its containment killed by its pid);
whatever raises once the child exists kills and collects the tree first (the engine's last
resort, ``salvage.collected``) and ends the sample as the runner's own failure; everything is
given back (the reaper's watch; the publication, the container and the slot each on its own, by
the engine's ``teardown.given_back``: one that fails is warned of and makes the sample the
runner's own failure, its figures kept, as the engine's release does). The Outcome it
returns is the engine's own type: the driver reads it as it reads the engine's.
"""

from __future__ import annotations

import os
import time

from .. import containment, envvars, rlimits
from ..containment.members import read_members
from ..errors import Failure, Kind
from ..spec import StdinMode
from ..engine import spawn
from ..engine.callers_umask import under
from ..engine.endings import ENDING_REPORTS, EndingFacts, EndingKind, Outcome, faulted, not_started
from ..engine.environment import build_environment
from ..engine.publishing import late, register
from ..engine.runner import ABANDONED, incomplete
from ..engine.state import CONTROL_ENDINGS
from ..engine.salvage import collected
from ..engine.teardown import given_back
from ..engine.tree_end import end, figures, read_tree
from ..engine.waits import carried

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..context import RunContext
    from ..engine.host import Host
    from ..engine.publishing import Publication
    from ..engine.child import Child
    from ..loop import Timer
    from ..spec import RunSpec

SWITCH = "PROCESSKIT_BENCH_PATH"  # ``engine``: every run through the engine (the test suite's, docs/bench.md)


def takes(host: Host, spec: RunSpec, context: RunContext, command: bool) -> bool:
    """Whether this run is a sample the direct path carries (the module's rule)."""
    return (
        command
        and host.lodging is not None
        and context.cwd is not None
        and spec.jsonl == os.devnull
        and not spec.echo
        and context.output_fd is not None
        and spec.stdin is StdinMode.NULL
        and context.publish_after_ms is not None
        and envvars.get(SWITCH) != "engine"
    )


def _nothing(event: object) -> None:
    """The events of a sample's ending: no stream to write them to."""


class Sample:
    """One sample in flight: what the loop's callbacks record (the endings, the root's exit).
    Enlisted on the host as a run is (``Host.enlist``), whose stop (``stop_signal``), Ctrl-Z and
    ``fg`` (``Host.signal_trees``: its ``container`` and ``spec``, ``continued``) reach it."""

    __slots__ = ("pending", "ended_ns", "publication", "spec", "container", "host", "child", "spawning_ns", "timers")

    def __init__(self, host: Host, spec: RunSpec, container: containment.Container) -> None:
        self.host = host
        self.pending: dict[EndingKind, str | None] = {}
        self.ended_ns: int | None = None
        self.publication: Publication | None = None
        self.spec = spec
        self.container = container
        self.child: Child | None = None  # once its exec is reported
        self.spawning_ns = 0  # ``time.monotonic_ns()`` just before the spawn
        self.timers: list[Timer] = []  # the publication's and the timeout's (``_carried``)

    def exited(self, ended_ns: int) -> None:
        self.ended_ns = ended_ns
        self.pending.setdefault(EndingKind.CHILD_EXIT, None)

    def stop(self, verb: str) -> None:
        """A control-plane ``cancel`` or ``kill`` (the publication's)."""
        self.pending.setdefault(CONTROL_ENDINGS[verb], None)

    def stop_signal(self, source: str) -> None:
        self.pending.setdefault(EndingKind.SIGNAL, source)

    def continued(self) -> None:
        """A SIGCONT: nothing to take back (no terminal lent)."""

    def members(self) -> list:
        """The container's members, read at each look (as ``RunState.read_member_list``)."""
        return read_members(self.container.member_pids())

    def settled(self) -> bool:
        """Whether an ending is recorded, the signals caught in the loop's turn dispatched
        first (``Host.turned``: a stop in the same turn as the exit ranks first, as in the
        race; an exit the spawn's linger saw is taken with no turn, and the driver takes a stop
        caught meanwhile as that sample's)."""
        self.host.turned()
        return bool(self.pending)

    def timed_out(self) -> None:
        self.pending.setdefault(EndingKind.OVERALL_TIMEOUT, None)

    def cancel_timers(self) -> None:
        timers, self.timers = self.timers, []
        for timer in timers:
            timer.cancel()


def sample(host: Host, spec: RunSpec, context: RunContext, backend: str, after_spawn) -> Outcome | None:
    """Carry ``spec`` once on ``host`` (the module's steps); never raises for what the run
    reports. ``after_spawn``: called once the child exists (the driver's counters opened ahead).
    None: its containment was refused before anything started, for the engine's path to carry
    (and report in its words)."""
    host.watch_signals()
    host.dispatch_caught_signals()
    if host.stop_source is not None:
        return Outcome(Kind.CANCELLED.code, Failure(Kind.CANCELLED, not_started(host.stop_source)))
    assert host.lodging is not None, "takes: a lodged host"
    slot = host.lodging.slot()
    try:
        container = containment.create(spec.limits, slot, host.may_adopt_orphans)
    except containment.ContainerError:
        slot.close()
        return None  # the engine's path carries it, and reports the refusal in its words (``launch.prepare``)
    except BaseException:
        slot.close()
        raise
    outcome: Outcome | None = None
    now = Sample(host, spec, container)
    host.enlist(now)  # type: ignore[arg-type] # what a stop and Ctrl-Z ask of a run, it has (``Sample``)
    try:
        outcome = _spawned(now, host, spec, context, backend, slot, after_spawn)
    finally:
        now.cancel_timers()  # a fault that raised left them: none may fire into what goes now
        host.delist(now)  # type: ignore[arg-type]
        problem = given_back(_release_steps(now, slot, outcome))
    if problem is not None:  # the engine's: the runner's own failure, the figures kept (``runner.incomplete``)
        outcome = incomplete(problem, outcome)
    child = now.child
    if child is not None:
        outcome.started_ns, outcome.ended_ns = now.spawning_ns, now.ended_ns
        outcome.max_rss_bytes, outcome.command_from_ns = child.max_rss_bytes, child.command_from_ns
        outcome.root_cpu_ns = child.root_cpu_ns
    return outcome


def _release_steps(now: Sample, slot, outcome: Outcome | None) -> list:
    """What the sample gives back, each step on its own (``teardown.given_back``): its
    publication (forgotten as it is closed: its answers lead back to ``now``, no cycle left),
    the container, the slot."""
    steps: list = [(now.container.release, ()), (slot.close, ())]
    publication, now.publication = now.publication, None
    if publication is not None:
        steps.insert(0, (publication.close, (outcome.exit_fields() if outcome is not None else ABANDONED,)))
    return steps


def _spawned(now: Sample, host: Host, spec: RunSpec, context: RunContext, backend: str, slot, after_spawn) -> Outcome:
    """The spawn, its exec waited for, and the sample carried (``_carried``); whatever raises
    once the child exists kills and collects the tree first (``salvage.collected``)."""
    container = now.container
    container.count_waits()  # the run's wait for a CPU, which the gate takes off its wall time
    env = build_environment(spec.env, spec.run_id, context.env, alone=False)
    now.spawning_ns = time.monotonic_ns()
    try:
        starting = under(
            context.umask, rlimits.given, context.limits, spawn.begin, spec.argv, env=env, cwd=None,
            container=container, stdin=StdinMode.NULL, pipe_output=False, output_fd=context.output_fd,
            backend=backend, linger_ms=context.linger_ms, passed=context.passed_fds,
        )  # fmt: skip
        container.cloned(starting.pid)
        try:
            containment.restart_ahead(slot)
            if not host.exec_waited(starting, lambda: EndingKind.SIGNAL in now.pending):
                raise Failure(Kind.CANCELLED, not_started(host.stop_source))
        except BaseException:
            starting.abandon()
            raise
        child = now.child = starting.child()
    except Failure as failure:
        return Outcome(failure.code, failure)
    except spawn.AttachError as exc:
        return Outcome(Kind.CONTAINER_ERROR.code, Failure(Kind.CONTAINER_ERROR, str(exc)))
    loop = host.loop
    try:
        container.adopt(child.pid)
        host.reaper.watch(child, now.exited, look_first=backend == "native")
        after_spawn()
        return _carried(now, host, spec, context, slot, child)
    except BaseException as exc:  # noqa: BLE001 - a bug, or an interrupt: the tree ends first, as the engine's
        carried(loop, collected(loop, container, child))
        if not isinstance(exc, Exception):
            raise
        return faulted(exc)  # the engine's words (``salvage.killed``)
    finally:
        host.reaper.forget(child.pid)


def _carried(now: Sample, host: Host, spec: RunSpec, context: RunContext, slot, child) -> Outcome:
    """The sample from its child's exec on: the loop turned until its ending (the publication's
    and the timeout's timers armed, and cancelled once it is decided, as the engine's
    ``runner._finish`` does), the ending's report, and the tree's figures and end by the
    engine's teardown decisions (``tree_end``)."""
    loop, reaper, container = host.loop, host.reaper, now.container
    if not now.pending:
        assert context.publish_after_ms is not None, "takes: published late"
        publish_at = now.spawning_ns / 1e9 + context.publish_after_ms / 1000
        now.timers.append(loop.call_at(publish_at, lambda: _publish(now, host, spec, context, slot, child)))
        if spec.timeout_ms is not None:  # from the clock, not the loop's last turn (an exit the linger saw takes none)
            now.timers.append(loop.call_at(loop.clock() + spec.timeout_ms / 1000, now.timed_out))
        loop.run_until(now.settled)
        now.cancel_timers()  # the ending is decided: not published during its teardown
    kind = min(now.pending, key=lambda kind: kind.priority)
    entry = ENDING_REPORTS[kind]
    facts = EndingFacts(spec, child.returncode, container.soft_stop_scope, _nothing, False)
    outcome = entry.report(facts, now.pending[kind])
    members = now.members
    tree = read_tree(reaper, members)
    _, usage = figures(container, tree)
    kill_asked = lambda: EndingKind.CONTROL_KILL in now.pending  # noqa: E731 - asked at each look
    ended = carried(loop, end(loop, reaper, container, child, members, tree, entry.graceful, spec.grace_ms, kill_asked))
    if entry.graceful and outcome.failure is not None:  # a grace a control kill cut short is said so, as the engine's
        outcome.failure = facts.stopped(outcome.failure, ended.shutdown if kill_asked() else None)
    outcome.usage = ended.final(container, usage)
    outcome.cpu_wait_ns = container.waited_ns()  # the tree gone: its waits are all in
    return outcome


def _publish(now: Sample, host: Host, spec: RunSpec, context: RunContext, slot, child) -> None:
    """The run published once its child has run the context's ``publish_after_ms``, as the engine's late
    publication (``publishing``): a registry that refuses leaves it unpublished, with a warning."""
    container = now.container
    cwd = context.cwd or ""  # ``takes``: read by the session

    def make(started_ns: int):
        return register(
            host.loop, spec, os.devnull, None, cwd, container, slot, lambda: child.pid,
            now.members, now.stop, host.lodging, started_ns, said=host.said,
        )  # fmt: skip

    now.publication = late(make, now.spawning_ns, host.said)
