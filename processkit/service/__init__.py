"""The runner service: the process that carries the runs of one calling process (``serve``,
each call's run in ``request``), and the processes it starts by exec (``spawned``) for a
batch (``batch``) and a benchmark (``bench``). ``processkit.api.shared`` starts it."""
