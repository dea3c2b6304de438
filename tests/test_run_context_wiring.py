"""What a carrier wires into a run (a batch's held memfds, late publication, bench's output
descriptor, the API's descriptors for the child's streams, the service's places for its path
stand-ins, a detached copy's ready pipe) is the run's ``RunContext``, handed to the engine beside
the ``RunSpec``; the spec keeps only what describes the run (issue 45). Held by reading the
source: no ``RunSpec`` field for the wiring, and no module sets it on a spec (``replace`` or the
constructor) after the grammar built it. What each wire does is held by the behaviour tests:
test_batch_keep (held), test_batch_lodging and test_bench_host (late publication), test_bench's
``--output``, test_api_streams (the child's descriptors), test_service_context (the places).
"""

from __future__ import annotations

import ast
import pathlib

import processkit
from processkit.context import RunContext
from processkit.spec import RunSpec

PACKAGE = pathlib.Path(processkit.__file__).resolve().parent
WIRING = ("held_fds", "publish_after_ms", "output_fd", "child_fds", "ready_fd", "stdio", "places")
# A spec's paths the runner service might put its own places into: it carries runs, it never
# describes one, so it sets none of them on a spec (the places go in the context).
PATHS = ("jsonl", "capture_dir", "stdin_file")


def _calls():
    paths = sorted(PACKAGE.rglob("*.py"))
    assert len(paths) > 100, "the package's modules were found"
    for path in paths:
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                yield path.relative_to(PACKAGE), name, {keyword.arg for keyword in node.keywords}


def test_the_spec_has_no_field_for_a_carriers_wiring_and_the_context_has_each():
    assert not set(WIRING) & set(RunSpec.__slots__)
    assert set(WIRING) <= set(RunContext.__slots__)


def test_no_module_sets_a_carriers_wiring_on_a_spec():
    found = [
        (str(path), name, sorted(keywords & set(WIRING)))
        for path, name, keywords in _calls()
        if name in ("replace", "RunSpec", "job_spec", "build") and keywords & set(WIRING)
    ]
    assert found == []


def test_the_runner_service_puts_no_place_of_its_own_on_a_spec():
    found = [
        (str(path), sorted(keywords & set(PATHS)))
        for path, name, keywords in _calls()
        if path.parts[0] == "service" and name == "replace" and keywords & set(PATHS)
    ]
    assert found == []
    service = (PACKAGE / "service" / "request.py").read_text() + (PACKAGE / "service" / "serve.py").read_text()
    assert "replace(**" not in service, "a spec's fields set from a dict of changes"


def test_a_places_stand_in_is_read_through_the_context():
    context = RunContext(places={"\0memory": "/proc/self/fd/9"})
    assert context.place("\0memory") == "/proc/self/fd/9"
    assert context.place("/tmp/own.jsonl") == "/tmp/own.jsonl"
    assert RunContext().place("\0memory") == "\0memory"
