"""The warnings a call of the API gives once its work is done (``api.warned.warn`` gives them):
each holds what its call returns, so a caller that runs with warnings as errors (``-W error``)
still has it. A module of its own so ``batching``'s ``BatchWarning`` has it without loading the
``api`` package."""


class CallWarning(UserWarning):
    """A warning a call gives once its work is done; ``result`` is what the call returns."""

    result: object = None
