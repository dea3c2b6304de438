"""How a run is described, wherever it is described: the option table, the value grammars and
the one construction of a ``RunSpec`` from typed values, below the CLI, the API, the batch
manifest and the benchmark. Stdlib-only and on the run path (docs/architecture.md's import rule).
"""
