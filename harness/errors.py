"""One exception type whose message is the one line a user sees."""


class SrpartError(Exception):
    """A user-facing error; str(e) is a single, complete line."""


def choose(table: dict, name: str, what: str):
    """table[name], or one line naming what `name` should have been."""
    try:
        return table[name]
    except KeyError:
        raise SrpartError(f"unknown {what} {name!r}: choose one of {', '.join(table)}") from None
