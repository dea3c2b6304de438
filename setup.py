"""Builds the optional native pump (csrc/) through cffi; installation succeeds without it.
The wheel is tagged cp310-abi3 (the module uses the limited API). Installs the man pages (man/man1, generated from the parsers by man/generate.py) into
<prefix>/share/man/man1."""

import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.dist import Distribution


class OptionalBuildExt(build_ext):
    """A failed compile (no compiler, odd platform) leaves the pure-Python pump in charge."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any build failure means "no native pump"
            self._skip(exc)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            self._skip(exc)

    @staticmethod
    def _skip(exc):
        sys.stderr.write(f"processkit: native pump not built ({exc}); the pure-Python pump will be used\n")


class ManPagesDistribution(Distribution):
    """An editable install (``pip install -e``) installs data files only when the distribution
    answers ``has_data()`` (setuptools' editable_wheel asks for that name); a regular install
    asks ``has_data_files()``. Answer both, so both install the man pages."""

    def has_data(self):
        return self.has_data_files()


MAN_PAGES = sorted(str(path) for path in Path("man/man1").glob("*.1"))

setup(
    cffi_modules=["csrc/build_native.py:ffibuilder"],
    cmdclass={"build_ext": OptionalBuildExt},
    data_files=[("share/man/man1", MAN_PAGES)],
    distclass=ManPagesDistribution,
    # The C module is built against the limited API (cffi names it _native.abi3.so), so one
    # wheel serves every supported CPython: tag it cp310-abi3, not the building interpreter's.
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
    # processkit-cli's own launcher, not a console_scripts entry point (whose generated
    # launcher imports ``re`` first): see the script's header.
    scripts=["processkit/cli/processkit-cli"],
)
