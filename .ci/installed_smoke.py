"""Every subcommand and the API, once, from an installed processkit: what a user of a regular
install gets, with the source tree on no path.

    python3 .ci/installed_smoke.py VENV [--expect-native yes|no]

Runs in a scratch directory outside the checkout with VENV's ``bin`` first on PATH and no
PYTHONPATH. Each failure names the command and prints its stderr; the exit status is 1 when any
failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]

API = """
import json, os, subprocess, sys
import processkit
result = processkit.run(["python3", "-c", "print('api')"], capture_output=True, text=True)
assert result.returncode == 0 and result.stdout == "api\\n", result
big = processkit.run(["head", "-c", "9000000", "/dev/zero"], capture_output=True)  # past the CLI's 8 MiB cap
assert len(big.stdout) == 9000000, big
merged = processkit.run("echo out; echo err >&2", shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
assert merged.stdout == "out\\nerr\\n", merged
alone = processkit.run(["sh", "-c", "echo ${HOME-unset}"], env={"PATH": os.environ["PATH"]}, capture_output=True, text=True)
assert alone.stdout == "unset\\n", alone
popen = processkit.start(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
assert popen.communicate(b"popen", timeout=60) == (b"popen", None) and popen.returncode == 0
stopped = processkit.start(["sleep", "60"])
stopped.terminate()
assert stopped.wait(60) == -15
lines = processkit.batch([{"id": "a", "args": ["true"]}, {"id": "b", "args": ["true"]}], jobs=2, out="api-batch")
assert sorted(line["id"] for line in lines) == ["a", "b"], lines
bench = processkit.bench([["true"]], runs=3)
assert len(bench.results) == 1, bench
print(json.dumps({"module": processkit.__file__}))
"""


class Smoke:
    def __init__(self, venv: Path, scratch: Path) -> None:
        self.venv = venv
        self.scratch = scratch
        self.failures: list[str] = []
        env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "MANPATH", "VIRTUAL_ENV")}
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["PROCESSKIT_CLI_REGISTRY_DIR"] = str(scratch / "registry")
        self.env = env

    def check(self, name: str, argv: list[str], *, stdin: str | None = None, then=None) -> str:
        """Run ``argv`` in the scratch directory; a non-zero exit or a failing ``then(stdout)`` is
        a failure named by ``name``."""
        try:
            completed = subprocess.run(
                argv, cwd=self.scratch, env=self.env, input=stdin, capture_output=True, text=True, timeout=120
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            self._fail(name, argv, f"could not run: {exc}")
            return ""
        problem = None if completed.returncode == 0 else f"exit {completed.returncode}"
        if problem is None and then is not None:
            try:
                then(completed.stdout)
            except Exception as exc:  # noqa: BLE001 - any failed expectation is this command's failure
                problem = f"unexpected result: {exc!r}"
        if problem is not None:
            self._fail(
                name,
                argv,
                f"{problem}\n--- stdout ---\n{completed.stdout[-2000:]}\n--- stderr ---\n{completed.stderr[-4000:]}",
            )
        else:
            print(f"ok   {name}")
        return completed.stdout

    def _fail(self, name: str, argv: list[str], detail: str) -> None:
        self.failures.append(name)
        print(f"FAIL {name}: {' '.join(argv)}\n{detail}", file=sys.stderr)


def exists(path: Path):
    def then(_stdout: str) -> None:
        assert path.is_file() and path.stat().st_size > 0, f"{path} missing or empty"

    return then


def has_lines(path: Path, count: int):
    def then(_stdout: str) -> None:
        lines = path.read_text().splitlines()
        assert len(lines) == count, f"{path} has {len(lines)} lines, not {count}"

    return then


def prints(text: str):
    def then(stdout: str) -> None:
        assert text in stdout, f"no {text!r} in the output"

    return then


def settled(registry: Path, limit: float = 60.0) -> None:
    """The API's service files a run's outcome just after the caller's call has returned (the
    caller need not wait for it): the scratch is removed once the registry says no run is live
    (no record or lock left), or a minute has passed."""
    deadline = time.monotonic() + limit
    while any(name.endswith((".json", ".lock")) for name in os.listdir(registry)):
        if time.monotonic() > deadline:
            raise SystemExit(f"a run's record was still live in {registry} after {limit:.0f} s")
        time.sleep(0.05)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("venv", type=Path)
    parser.add_argument("--expect-native", choices=("yes", "no"), required=True)
    args = parser.parse_args()
    venv = args.venv.resolve()
    python = str(venv / "bin" / "python")
    cli = str(venv / "bin" / "processkit-cli")
    with tempfile.TemporaryDirectory(prefix="processkit-smoke-") as scratch_name:
        scratch = Path(scratch_name)
        smoke = Smoke(venv, scratch)

        def outside_checkout(stdout: str) -> None:
            where = json.loads(stdout)
            assert not where["module"].startswith(str(CHECKOUT)), f"imported from the checkout: {where}"
            assert where["native"] == (args.expect_native == "yes"), f"native module: {where['native']}"

        probe = "import json, processkit, processkit.native as n; print(json.dumps({'module': processkit.__file__, 'native': n.module() is not None}))"
        smoke.check("installed outside the checkout", [python, "-c", probe], then=outside_checkout)
        commands = smoke.check(
            "subcommand list",
            [python, "-c", "from processkit.cli.main import COMMANDS; print(' '.join(COMMANDS))"],
        ).split()
        smoke.check("--help", [cli, "--help"])
        for command in commands:
            smoke.check(f"{command} --help", [cli, command, "--help"])
        smoke.check("probe --json", [cli, "probe", "--json"], then=lambda out: json.loads(out)["surface"])
        smoke.check(
            "run with capture",
            [cli, "run", "--jsonl", "run.jsonl", "--capture-dir", "capture", "--", "python3", "-c", "print('hello')"],
            then=exists(scratch / "capture" / "stdout.log"),
        )
        (scratch / "jobs.jsonl").write_text('{"id": "one", "args": ["true"]}\n{"id": "two", "args": ["echo", "two"]}\n')
        smoke.check(
            "two-job batch",
            [cli, "batch", "jobs.jsonl", "--jobs", "2", "--out", "batch-out"],
            then=has_lines(scratch / "batch-out" / "summary.jsonl", 2),
        )
        smoke.check(
            "three-run bench with --export-json",
            [cli, "bench", "--runs", "3", "--export-json", "bench.json", "--", "true"],
            then=exists(scratch / "bench.json"),
        )
        smoke.check(
            "report of the run", [cli, "report", "run.jsonl", "-o", "run.html"], then=exists(scratch / "run.html")
        )
        smoke.check(
            "report of the bench export",
            [cli, "report", "bench.json", "-o", "bench.html"],
            then=exists(scratch / "bench.html"),
        )
        smoke.check("completion bash", [cli, "completion", "bash"], then=prints("processkit-cli"))
        smoke.check("doctor", [cli, "doctor"])
        smoke.check("man processkit-cli-run found", ["man", "-w", "processkit-cli-run"])
        smoke.check("the API: run, batch, bench", [python, "-c", API])
        settled(scratch / "registry")
        if args.expect_native == "no":
            smoke.check(
                "PROCESSKIT_PUMP=native says the C module is missing",
                ["sh", "-c", f"PROCESSKIT_PUMP=native {cli} run --jsonl native.jsonl -- true; test $? -eq 111"],
            )
        if smoke.failures:
            print(
                f"installed smoke test ({venv}): {len(smoke.failures)} failed: {', '.join(smoke.failures)}",
                file=sys.stderr,
            )
            return 1
        print(f"installed smoke test ({venv}): every command passed")
        return 0


if __name__ == "__main__":
    sys.exit(main())
