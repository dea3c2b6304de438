"""What a regular install gets: a wheel and an sdist built from this checkout hold every package,
every data file and every man page of the source tree.

An editable install imports from the source tree, so a package left out of the build is invisible
to every other test; these build the artifacts for real (in a copy of the tree, so a stale
``build/`` can neither hide nor add a file) and name what is missing. ``.ci/run`` then installs a
wheel built from the sdist into a fresh venv and runs every subcommand there
(``.ci/installed_smoke.py``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILD_OUTPUTS = ("__pycache__", "*.pyc", "*.so", "*.o", "_native.c", "build", "dist", "*.egg-info")
LAUNCHER = "processkit/cli/processkit-cli"  # installed as a script, not as package data


def _source_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "src"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".git", ".venv", *BUILD_OUTPUTS))
    return copy


def _package_files() -> list[str]:
    """Every file under processkit/ that an install must carry: modules and data alike."""
    files = []
    for path in sorted((ROOT / "processkit").rglob("*")):
        relative = path.relative_to(ROOT).as_posix()
        if path.is_dir() or any(part == "__pycache__" for part in path.parts):
            continue
        if path.suffix in (".pyc", ".so", ".o") or path.name == "_native.c" or relative == LAUNCHER:
            continue
        files.append(relative)
    return files


def _man_pages() -> list[str]:
    return sorted(path.name for path in (ROOT / "man" / "man1").glob("*.1"))


def _build(tmp_path: Path, *args: str, source: Path | None = None) -> Path:
    out = tmp_path / "dist"
    source = source or _source_copy(tmp_path)
    completed = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), *args, str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, f"the build failed:\n{completed.stdout[-3000:]}\n{completed.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    pytest.importorskip("build")
    pytest.importorskip("wheel")
    (path,) = _build(tmp_path_factory.mktemp("wheel"), "--wheel").glob("*.whl")
    return path


def test_the_wheel_holds_every_package_and_data_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [name for name in _package_files() if name not in names]
    assert not missing, f"{wheel.name} lacks files of the source tree: {missing}"
    packages = {str(Path(name).parent) for name in _package_files() if name.endswith(".py")}
    assert {"processkit/batching", "processkit/benchmark"} <= packages  # the two this test was written for


def test_the_wheel_installs_the_man_pages_and_the_launcher(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    data = "processkit-{}.data/".format(wheel.name.split("-")[1])
    missing = [page for page in _man_pages() if f"{data}data/share/man/man1/{page}" not in names]
    assert not missing, f"{wheel.name} lacks man pages: {missing}"
    assert f"{data}scripts/processkit-cli" in names
    assert LAUNCHER not in names  # the launcher is a script, not a module file


def test_the_wheel_is_tagged_for_the_limited_api(wheel):
    """One wheel for every supported CPython: the C module uses the limited API."""
    _, _, python, abi, _platform = wheel.stem.split("-")
    assert (python, abi) == ("cp310", "abi3"), wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    native = [name for name in names if name.startswith("processkit/_native")]
    assert native in ([], ["processkit/_native.abi3.so"]), native


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> Path:
    """One sdist, built from a copy of the tree in which a run left its byte-code bundle (what the
    bundle test looks for; a file under ``__pycache__``, which no other test expects shipped)."""
    pytest.importorskip("build")
    tmp_path = tmp_path_factory.mktemp("sdist")
    copy = _source_copy(tmp_path)
    cache = copy / "processkit" / "cli" / "__pycache__"
    cache.mkdir()
    (cache / f"run.{sys.implementation.cache_tag}.bundle").write_bytes(b"left by a run")
    (path,) = _build(tmp_path, "--sdist", source=copy).glob("*.tar.gz")
    return path


def test_the_sdist_holds_every_source_a_wheel_is_built_from(sdist):
    """pip builds a release's wheel from its sdist: whatever the sdist lacks, that wheel lacks."""
    with tarfile.open(sdist) as archive:
        top = archive.getnames()[0].split("/")[0]
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    expected = [*_package_files(), LAUNCHER, "setup.py", "pyproject.toml", "README.md", "MANIFEST.in"]
    expected += [
        path.relative_to(ROOT).as_posix() for path in (ROOT / "csrc").iterdir() if path.suffix in (".c", ".h", ".py")
    ]
    expected += [f"man/man1/{page}" for page in _man_pages()]
    missing = [name for name in expected if name not in names]
    assert not missing, f"{top}.tar.gz lacks: {missing}"
    built = [name for name in names if name.endswith((".so", ".pyc", ".o"))]
    assert not built, f"{top}.tar.gz carries build outputs: {built}"


def test_a_runs_byte_code_bundle_left_in_the_tree_is_not_shipped(sdist):
    """A ``run`` keeps its modules' byte code in ``processkit/cli/__pycache__/run.<tag>.bundle``
    (``cli/quickimport.py``): a cache, as pycs are, so a tree a run was started from ships none."""
    with tarfile.open(sdist) as archive:
        assert [name for name in archive.getnames() if name.endswith(".bundle")] == []
