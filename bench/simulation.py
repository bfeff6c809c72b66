"""What the deterministic simulator does in a minute, and how soon it finds each fix taken back.

Prints, for the core as it is, the schedules explored per minute on one core and their outcome;
then, for each fix ``mirrorlake.simulation.reverts`` can take back, the seconds (and seeds) until
the first counterexample, exploring from seed 0, and the length of that counterexample cut down;
then one cut-down trace, as a person reads it. The numbers are this machine's: run it alone.

    .venv/bin/python -m bench.simulation [--seconds 60] [--trace NAME]
"""

from __future__ import annotations

import argparse
import time

from mirrorlake.simulation.reverts import REVERTS
from mirrorlake.simulation.shrink import shrink
from mirrorlake.simulation.world import SimSettings, explore


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="budget per exploration (default 60)")
    parser.add_argument("--trace", default="each-run-ends-on-its-own", help="the revert whose trace is printed")
    args = parser.parse_args(argv)
    settings = SimSettings()
    print(f"settings: {settings}")
    clean = explore(settings, budget_s=args.seconds, stop_at_first=False)
    rate = clean.schedules / clean.seconds * 60
    print(f"the core as it is: {clean.schedules} schedules in {clean.seconds:.1f} s ({rate:,.0f} a minute), "
          f"{len(clean.failures)} failed")  # fmt: skip
    print()
    print("| fix taken back | found by | first counterexample | seconds | cut down to |")
    print("|---|---|---|---|---|")
    traces = {}
    for r in REVERTS.values():
        with r.patch():
            started = time.monotonic()
            found = explore(settings, budget_s=args.seconds)
            seconds = time.monotonic() - started
            if found.failures:
                small = shrink(settings, found.failures[0])
                traces[r.name] = small
                kinds = ", ".join(sorted({v.kind for v in small.violations}))
                print(f"| {r.name}: {r.what} | {r.found_by} | seed {found.failures[0].seed} ({kinds}) | "
                      f"{seconds:.1f} | {len(small.actions)} actions |")  # fmt: skip
            else:
                print(f"| {r.name}: {r.what} | {r.found_by} | none in {found.schedules} schedules | "
                      f"{seconds:.1f} | - |")  # fmt: skip
    if args.trace in traces:
        small = traces[args.trace]
        print()
        print(f"the counterexample of {args.trace}, cut down: " + "; ".join(map(str, small.violations)))
        print("\n".join(small.trace))


if __name__ == "__main__":
    main()
