"""What a test's caller script runs to write frames on its runner service's socket by hand: the
library's connection, the mark its frames carry after their header, and its last spec rebuilt as a
value the script can change and send (``spec``)."""

LAST_SPEC = """connection = shared.connection()
mark = getattr(connection, "mark", b"")  # after each frame's header, as the library writes them
kind, values = connection.sent_spec[:2]
spec = kind.__new__(kind)
for name, value in zip(kind._fields, values):
    setattr(spec, name, value)
"""
