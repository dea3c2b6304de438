"""A one-off mutation pass: does some test fail when the code under test is changed?

Each mutant changes one operator or constant of one module (a comparison, an arithmetic or
boolean operator, ``not``, a number or a truth value), is written in place of the module, and
the given tests run against it with a time limit; the module is put back after each. A mutant
no test fails "survives": a decision the tests do not pin. In place, because the tests drive
the installed ``processkit-cli`` (an editable install of this tree), which a copied tree would
not reach. Used where neither mutmut nor cosmic-ray can be installed; see bench/README.md,
"Mutation testing".

    python .ci/mutate.py --sample 25 --seed 1 --timeout 120 processkit/benchmark/stats.py \\
        -- tests/test_bench_measure.py tests/test_bench_baseline.py
"""

from __future__ import annotations

import argparse
import ast
import copy
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

SWAPS = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.FloorDiv,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.And: ast.Or,
    ast.Or: ast.And,
}


def sites(tree: ast.AST) -> list[tuple[int, str]]:
    """(index of the node in ast.walk order, what changes) for every mutation of the module."""
    found = []
    for index, node in enumerate(ast.walk(tree)):
        if isinstance(node, ast.Compare):
            found += [(index, f"op{k}") for k, op in enumerate(node.ops) if type(op) in SWAPS]
        elif isinstance(node, (ast.BinOp, ast.BoolOp, ast.AugAssign)) and type(node.op) in SWAPS:
            found.append((index, "op"))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            found.append((index, "not"))
        elif isinstance(node, ast.Constant) and type(node.value) in (bool, int):
            found.append((index, "const"))
    return found


def mutate(tree: ast.AST, index: int, how: str) -> tuple[ast.AST, int, str]:
    """A copy of the tree with that one change; the line and a short description."""
    tree = copy.deepcopy(tree)
    node = list(ast.walk(tree))[index]
    if how.startswith("op") and isinstance(node, ast.Compare):
        k = int(how[2:])
        old = node.ops[k]
        node.ops[k] = SWAPS[type(old)]()
        said = f"{type(old).__name__} -> {type(node.ops[k]).__name__}"
    elif how == "op":
        old = node.op
        node.op = SWAPS[type(old)]()
        said = f"{type(old).__name__} -> {type(node.op).__name__}"
    elif how == "not":
        parent = next(
            p for p in ast.walk(tree) for f, v in ast.iter_fields(p) if v is node or (isinstance(v, list) and node in v)
        )
        for field, value in ast.iter_fields(parent):
            if value is node:
                setattr(parent, field, node.operand)
            elif isinstance(value, list) and node in value:
                value[value.index(node)] = node.operand
        said = "not x -> x"
    else:
        old_value = node.value
        node.value = (not old_value) if isinstance(old_value, bool) else old_value + 1
        said = f"{old_value!r} -> {node.value!r}"
    return tree, node.lineno, said


def run_tests(pytest_args: list[str], timeout: float, env: dict) -> str:
    """The tests against the mutant, in a session of their own so that a timeout ends every
    process they started too."""
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *pytest_args]
    tests = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True
    )
    try:
        return "killed  " if tests.wait(timeout) != 0 else "SURVIVED"
    except subprocess.TimeoutExpired:
        return "timeout "  # a mutant that hangs the tests is found too
    finally:
        try:
            os.killpg(tests.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        tests.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=0, help="mutants per module (0: all)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=120, help="seconds per mutant (over: killed)")
    parser.add_argument("module", nargs="+", help="the modules to mutate; after --, the pytest arguments")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    pytest_args = argv[cut + 1 :]
    if not pytest_args:
        parser.error("name the tests after --: the whole suite per mutant is far too long")
    # A stop (SIGTERM, as well as ^C) still puts the module back, in the finally below.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    survivors = total = 0
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    for module in args.module:
        path = Path(module)
        original = path.read_bytes()
        tree = ast.parse(original)
        chosen = sites(tree)
        if args.sample and len(chosen) > args.sample:
            chosen = sorted(random.Random(args.seed).sample(chosen, args.sample))
        print(f"{module}: {len(sites(tree))} mutants, running {len(chosen)}", flush=True)
        try:
            for index, how in chosen:
                mutant, line, said = mutate(tree, index, how)
                path.write_text(ast.unparse(mutant) + "\n")
                for cached in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
                    cached.unlink()
                verdict = run_tests(pytest_args, args.timeout, env)
                total += 1
                survivors += verdict == "SURVIVED"
                print(f"  {verdict} {module}:{line} {said}", flush=True)
        finally:
            path.write_bytes(original)
            for cached in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
                cached.unlink()
    print(f"{total - survivors} of {total} killed, {survivors} survived")
    return 0


if __name__ == "__main__":
    sys.exit(main())
