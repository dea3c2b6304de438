"""The package's version, written once: pyproject.toml, ``--version``, ``probe`` and the man pages read it here."""

__version__ = "0.1.0"
