"""User-facing errors: one message that names the bad input and the fix.

The CLI prints these as a single line and exits 2; anything else is a bug and keeps its traceback.
"""


class HiertuneError(Exception):
    """An error caused by the user's input or environment, with a message that says how to fix it."""


class ResourceUnavailableError(HiertuneError):
    """A runner or actor needs a resource (GPU, edgetpu, ...) that no node in the cluster has."""
