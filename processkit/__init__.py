"""processkit: run one command inside a containment boundary, exactly and boundedly."""

__version__ = "0.1.0"  # the one place the version is written: pyproject.toml reads it from here
