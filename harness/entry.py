"""The one way every srpart entry point ends: exit codes and one-line errors.

    if __name__ == "__main__":
        entry.run(main)

  0    done                      (what main returned otherwise)
  2    srpart: error: ...        bad input, a missing package, a stale kernel
  3    srpart: guest failed: ... a panic, a bad pattern, a timeout in a guest
  130  interrupted
"""
from __future__ import annotations

import sys
from typing import Callable, NoReturn

from .console import GuestError
from .errors import SrpartError


def call(main: Callable[[], int]) -> int:
    try:
        return main()
    except SrpartError as e:
        print(f"srpart: error: {e}", file=sys.stderr)
        return 2
    except GuestError as e:
        print(f"srpart: guest failed: {e}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        return 130


def run(main: Callable[[], int]) -> NoReturn:
    sys.exit(call(main))
