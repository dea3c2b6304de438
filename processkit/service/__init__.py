"""The runner service: the process that carries the runs of one calling process (``serve``,
each call's run in ``request``), and the process it starts by exec for a batch (``batch``).
``processkit.api.service`` starts it."""
