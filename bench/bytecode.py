"""Compile the measured trees' bytecode before timing them.

An editable checkout on a machine with ``PYTHONDONTWRITEBYTECODE=1`` (this one sets it) keeps no
``__pycache__``, so every ``processkit-cli`` start compiles each module it imports from source:
about 70 ms of a bench's or a batch's start-up that an installed wheel (its bytecode compiled at
install) never pays. The side-by-side scripts measure what users run, so they compile first.
"""

from __future__ import annotations

import compileall
import os

import processkit


def compile_trees(*trees: str | None) -> None:
    """Write the bytecode of the installed package and of each source tree given."""
    packages = [os.path.dirname(processkit.__file__)]
    packages += [os.path.join(tree, "processkit") for tree in trees if tree]
    for package in packages:
        compileall.compile_dir(package, quiet=1)
