"""Load test of the command channel (issue 29): many commands, many guests, side by side.

    /usr/bin/python3 -m harness.channel_check [--kernel 6.1] [--guests 50]
                                              [--commands 100] [--parallel 3]

Boots `--guests` guests (8 drives each, partscan on), `--parallel` at a time
on the machine's cores, and runs `--commands` short commands in each (an echo
whose output must come back, and a read of /proc/partitions). Every command's
start -- from the line sent to its GO marker, console.Console.slowest_start --
is what a stuck channel would delay: with no wake-up input, a command that
does not start within its timeout fails, and so does this run. Prints the
guests, the commands, the slowest start, and how many commands took longer
than --late seconds from sending to their answer (0.5 s: five times the
usual round trip). A figure, not a timed
assertion: the exit status says only whether every command ran and answered.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import time

from .vm import VM, boot_spec


def one_guest(kernel: str, index: int, commands: int, late: float) -> tuple[int, float, int]:
    """(commands run, the slowest start, round trips longer than `late`) of one guest."""
    from fixtures import catalog

    spec = boot_spec(kernel, "srpart", [i.path for i in catalog.drive_images(8)],
                     ["sr_mod.partscan=1"])
    n_late = 0
    with VM(spec, f"{kernel}-channel-check-{index}") as vm:
        for i in range(commands):
            t = time.monotonic()
            out = vm.check(f"echo {index}.{i}; cat /proc/partitions >/dev/null")
            n_late += time.monotonic() - t > late
            if out.strip() != f"{index}.{i}":
                raise AssertionError(f"guest {index}, command {i}: {out!r}")
        slowest = vm.console.slowest_start
    return commands, slowest, n_late


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="harness.channel_check", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", default="6.1")
    ap.add_argument("--guests", type=int, default=50)
    ap.add_argument("--commands", type=int, default=100)
    ap.add_argument("--parallel", type=int, default=3)
    ap.add_argument("--late", type=float, default=0.5)
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(args.parallel) as pool:
        runs = list(pool.map(lambda k: one_guest(args.kernel, k, args.commands, args.late),
                             range(args.guests)))
    cmds = sum(r[0] for r in runs)
    print(f"srpart channel: {args.guests} guests ({args.parallel} at a time), {cmds} commands "
          f"in {time.monotonic() - t0:.0f} s; the slowest start {max(r[1] for r in runs):.3f} s; "
          f"commands answered after more than {args.late:g} s: {sum(r[2] for r in runs)}")
    return 0


if __name__ == "__main__":
    from harness import entry
    entry.run(main)
