"""One exception type whose message is the one line a user sees."""


class SrpartError(Exception):
    """A user-facing error; str(e) is a single, complete line."""
