"""Builds the optional native pump (csrc/) through cffi; installation succeeds without it."""

import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext


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


setup(cffi_modules=["csrc/build_native.py:ffibuilder"], cmdclass={"build_ext": OptionalBuildExt})
