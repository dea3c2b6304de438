"""``batch`` as GNU parallel, make and nextest users work it, side by side with what it replaces.

Three figures, each A and B alternated (A B, B A, ...) through side_by_side.measure: the medians
of wall time and of CPU time (the batch and every job it ran, from ``wait4``) and the median of
the pairwise ratios A/B:

- ``stdin``: ``seq 1000 | batch -- true {}`` against the same 1,000 jobs as a manifest (both
  through ``sh -c``, so each pays one shell);
- ``graph``: 10,000 ``true`` jobs as 100 fan-outs that fan in (a root, 98 jobs needing it, a join
  needing those 98) against the same lines without ``needs``: the graph's scheduling overhead,
  and (``schedule``) the same jobs read and scheduled in process, with no process run;
- ``gcc``: 32 generated C files compiled at ``-j2`` by ``batch -- gcc -c {} -o {.}.o ::: *.c``
  against ``parallel`` when it is installed, else ``make -j2`` over the same rules; the objects
  of both are compared byte for byte.

    python3 bench/batch_habits.py -n 5
    python3 bench/batch_habits.py -n 3 --only graph
    python3 bench/batch_habits.py -n 6 --only gcc --sources brotli-1.1.0 --cflags "-O2 -I $PWD/brotli-1.1.0/c/include"

``--sources``: brotli's own 32 files (``c/**/*.c`` of the ``Brotli`` sdist from PyPI:
``pip download --no-binary :all: --no-deps brotli==1.1.0``) in place of the generated ones.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shlex
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from side_by_side import measure  # noqa: E402


def side_by_side(name: str, a: list[str], b: list[str], runs: int) -> dict:
    measure(a)
    measure(b)
    pairs = []
    for index in range(runs):  # A B, then B A: a drift in the machine's load weighs on both
        if index % 2:
            second, first = measure(b), measure(a)
        else:
            first, second = measure(a), measure(b)
        assert first["code"] == 0 and second["code"] == 0, (name, first, second)
        pairs.append((first, second))
    result: dict = {"figure": name}
    for key in ("wall", "cpu"):
        values_a = [pair[0][key] for pair in pairs]
        values_b = [pair[1][key] for pair in pairs]
        result[f"a_{key}_median_s"] = round(statistics.median(values_a), 4)
        result[f"b_{key}_median_s"] = round(statistics.median(values_b), 4)
        result[f"{key}_median_pair_ratio"] = round(statistics.median(x / y for x, y in zip(values_a, values_b)), 4)
    print(json.dumps(result), flush=True)
    return result


def write_lines(path: str, values) -> str:
    with open(path, "w") as handle:
        handle.writelines(json.dumps(value) + "\n" for value in values)
    return path


def stdin_figure(cli: str, work: str, runs: int) -> dict:
    manifest = write_lines(
        os.path.join(work, "true.jsonl"), ({"args": ["true", str(n)], "id": str(n)} for n in range(1, 1001))
    )
    keep = "--keep failed"
    a = ["sh", "-c", f"seq 1000 | {cli} batch {keep} --out {work}/stdin-out -- true {{}}"]
    b = ["sh", "-c", f"{cli} batch {manifest} {keep} --out {work}/manifest-out"]
    return side_by_side("stdin 1000 x true vs manifest", a, b, runs)


def graph_jobs(with_needs: bool):
    for group in range(100):
        root = f"g{group}-root"
        yield {"id": root, "args": ["true"]}
        leaves = [f"g{group}-{leaf}" for leaf in range(98)]
        for leaf in leaves:
            yield {"id": leaf, "args": ["true"], **({"needs": [root]} if with_needs else {})}
        yield {"id": f"g{group}-join", "args": ["true"], **({"needs": leaves} if with_needs else {})}


def graph_figure(cli: str, work: str, runs: int) -> dict:
    graph = write_lines(os.path.join(work, "graph.jsonl"), graph_jobs(True))
    flat = write_lines(os.path.join(work, "flat.jsonl"), graph_jobs(False))
    a = [*shlex.split(cli), "batch", graph, "--keep", "failed", "--out", f"{work}/graph-out"]
    b = [*shlex.split(cli), "batch", flat, "--keep", "failed", "--out", f"{work}/flat-out"]
    return side_by_side("graph 10000 jobs vs no needs", a, b, runs)


class _Passed:
    """A job's line as the schedule reads it: exit 0."""

    exit_code = 0
    source = "child_exit"


def _scheduled(jobs) -> float:
    """The seconds the graph's check and the ready queue take to carry ``jobs`` through two slots,
    every job exiting 0 at once (no process runs: the scheduling alone)."""
    import time

    from processkit.batching.graph import check, has_needs
    from processkit.batching.schedule import Schedule

    started = time.perf_counter()
    if has_needs(jobs):
        check(jobs)
    schedule = Schedule(jobs, 2)
    running: list = []
    while True:
        while len(running) < 2 and (job := schedule.peek()) is not None:
            schedule.take(job)
            running.append(job)
        if not running:
            return time.perf_counter() - started
        schedule.ended(running.pop(0), _Passed)


def schedule_figure(cli: str, work: str, runs: int) -> dict:
    """In process: the manifest read and the scheduling of the 10,000 jobs, with and without needs."""
    import time

    from processkit.batching.manifest import jobs_from

    figures: dict = {"figure": "graph scheduling in process (10000 jobs)"}
    for label, with_needs in (("needs", True), ("no_needs", False)):
        reads, schedules = [], []
        for _ in range(runs):
            started = time.perf_counter()
            jobs = jobs_from(graph_jobs(with_needs))
            reads.append(time.perf_counter() - started)
            schedules.append(_scheduled(jobs))
        figures[f"{label}_read_median_s"] = round(statistics.median(reads), 4)
        figures[f"{label}_schedule_median_s"] = round(statistics.median(schedules), 4)
    print(json.dumps(figures), flush=True)
    return figures


def c_source(index: int) -> str:
    body = "\n".join(
        f"int f{index}_{n}(int x) {{ int s = 0; for (int i = 0; i < x; i++) s += (i * {n + 3}) ^ (s >> 3); return s; }}"
        for n in range(300)
    )
    return f"/* generated file {index} */\n{body}\n"


def source_trees(work: str, given: str | None) -> tuple[dict[str, str], list[str]]:
    """Two identical trees of C sources, one a side (each side's objects land beside its
    sources): a copy of ``given`` (its ``.c`` files, at any depth), or 32 generated files."""
    trees = {}
    for side in ("batch", "peer"):
        tree = os.path.join(work, f"c-{side}")
        if given is not None:
            shutil.copytree(given, tree)
        else:
            os.makedirs(tree)
            for index in range(32):
                with open(os.path.join(tree, f"file{index}.c"), "w") as handle:
                    handle.write(c_source(index))
        trees[side] = tree
    relative = sorted(
        os.path.relpath(os.path.join(root, name), trees["batch"])
        for root, _, names in os.walk(trees["batch"])
        for name in names
        if name.endswith(".c")
    )
    return trees, relative


def gcc_figure(cli: str, work: str, runs: int, given: str | None = None, cflags: str = "") -> dict | None:
    if shutil.which("gcc") is None:
        print(json.dumps({"figure": "gcc", "skipped": "no gcc"}))
        return None
    trees, relative = source_trees(work, given)
    gcc = ["gcc", *shlex.split(cflags), "-c", "{}", "-o", "{.}.o"]
    sources = [os.path.join(trees["batch"], name) for name in relative]
    a = [*shlex.split(cli), "batch", "--jobs", "2", "--keep", "failed", "--out", f"{work}/gcc-out"]
    a += ["--", *gcc, ":::", *sources]
    peer_sources = [os.path.join(trees["peer"], name) for name in relative]
    if shutil.which("parallel"):
        b = ["parallel", "--will-cite", "-j2", *gcc, ":::", *peer_sources]
        peer = "parallel -j2"
    else:
        makefile = os.path.join(trees["peer"], "Makefile")
        objects = " ".join(source[:-2] + ".o" for source in peer_sources)
        with open(makefile, "w") as handle:
            handle.write(f"all: {objects}\n%.o: %.c\n\tgcc {cflags} -c $< -o $@\n")
        b = ["make", "-s", "-B", "-j2", "-f", makefile]
        peer = "make -j2 (parallel is not installed)"
    result = side_by_side(f"gcc {len(relative)} files -j2: batch vs {peer}", a, b, runs)
    objects = [name[:-2] + ".o" for name in relative]
    same = all(
        os.path.exists(os.path.join(trees["batch"], name))
        and filecmp.cmp(os.path.join(trees["batch"], name), os.path.join(trees["peer"], name), shallow=False)
        for name in objects
    )
    result["objects_identical"] = same
    print(json.dumps({"figure": "gcc objects", "count": len(objects), "identical": same}))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=5, help="counted pairs of each figure")
    parser.add_argument("--cli", default="processkit-cli", help="the processkit-cli to measure")
    parser.add_argument("--only", choices=("stdin", "graph", "schedule", "gcc"), action="append")
    parser.add_argument(
        "--sources", metavar="DIR", help="gcc: compile DIR's .c files (e.g. brotli's) instead of generated ones"
    )
    parser.add_argument("--cflags", default="", help="gcc: flags before -c (e.g. '-O2 -I DIR/c/include')")
    args = parser.parse_args()
    chosen = args.only or ["stdin", "graph", "schedule", "gcc"]
    with tempfile.TemporaryDirectory(prefix="batch-habits-") as work:
        figures = (("stdin", stdin_figure), ("graph", graph_figure), ("schedule", schedule_figure))
        for name, figure in figures:
            if name in chosen:
                figure(args.cli, work, args.n)
        if "gcc" in chosen:
            gcc_figure(args.cli, work, args.n, args.sources, args.cflags)


if __name__ == "__main__":
    main()
