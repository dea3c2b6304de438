"""The runner service: the process that carries the runs of one calling process (``serve``),
and the process it forks for a batch (``batch``). ``processkit.api.service`` starts it."""
