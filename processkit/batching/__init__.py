"""Batches: one process running a whole manifest of jobs, each a full run, side by side on one
loop (``processkit-cli batch``, ``processkit.batch``). Imported only by those: a plain ``run``
never loads it."""
