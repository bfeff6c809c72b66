"""``python -m mirrorlake.simulation``: explore seeded schedules, print what failed, cut down and readable.

Exit 0 when every schedule held every check, 1 when one failed (its minimal trace printed), 2 on
bad arguments.
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import ExitStack

from mirrorlake.simulation.shrink import shrink
from mirrorlake.simulation.world import SimSettings, explore, run_seed

_DEFAULTS = SimSettings()


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m mirrorlake.simulation",
        description="Deterministic simulation of an at-least-once flow's processes under crashes (issue 60).",
    )
    parser.add_argument("--seed", type=int, action="append", help="run this seed (repeatable); else explore")
    parser.add_argument("--first-seed", type=int, default=0, help="explore seeds from this one on (default 0)")
    parser.add_argument("--seconds", type=float, default=60.0, help="exploration budget (default 60)")
    parser.add_argument("--all", action="store_true", help="go on past the first failure, counting them")
    parser.add_argument("--revert", action="append", default=[], metavar="NAME", help="revert a fix (--list)")
    parser.add_argument("--list", action="store_true", help="list the fixes --revert can take back")
    parser.add_argument("--trace", action="store_true", help="print the trace of every --seed")
    parser.add_argument("--partitions", type=int, default=_DEFAULTS.partitions)
    parser.add_argument("--processes", type=int, default=_DEFAULTS.slots)
    parser.add_argument("--steps", type=int, default=_DEFAULTS.steps, help="actions before the world heals")
    args = parser.parse_args(argv)
    for name, value in (("--partitions", args.partitions), ("--processes", args.processes), ("--steps", args.steps)):
        if value < 1:
            parser.error(f"{name} must be at least 1, not {value}")
    if args.seconds <= 0:
        parser.error(f"--seconds must be positive, not {args.seconds}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    from mirrorlake.simulation.reverts import REVERTS

    if args.list:
        for r in REVERTS.values():
            print(f"{r.name}: {r.what} (found by {r.found_by})")
        return 0
    unknown = [n for n in args.revert if n not in REVERTS]
    if unknown:
        print(f"error: no fix named {', '.join(unknown)} to revert (--list names them)", file=sys.stderr)
        return 2
    settings = SimSettings(partitions=args.partitions, slots=args.processes, steps=args.steps)
    with ExitStack() as stack:
        for name in args.revert:
            stack.enter_context(REVERTS[name].patch())
            print(f"reverted: {REVERTS[name].what}")
        if args.seed:
            failed = 0
            for seed in args.seed:
                outcome = run_seed(settings, seed)
                print(f"seed {seed}: {'ok' if outcome.ok else '; '.join(map(str, outcome.violations))}")
                if args.trace:
                    print("\n".join(outcome.trace))
                if not outcome.ok:
                    failed += 1
                    _print_minimal(settings, outcome)
            return 1 if failed else 0
        started = time.monotonic()
        found = explore(settings, first_seed=args.first_seed, budget_s=args.seconds, stop_at_first=not args.all)
        rate = found.schedules / max(found.seconds, 1e-9) * 60
        print(
            f"{found.schedules} schedules from seed {args.first_seed} in {found.seconds:.1f} s ({rate:,.0f} a minute), "
            f"{len(found.failures)} failed"
        )
        if found.failures:
            first = found.failures[0]
            print(f"first failure: seed {first.seed}, {time.monotonic() - started:.1f} s in")
            _print_minimal(settings, first)
            return 1
    return 0


def _print_minimal(settings: SimSettings, outcome) -> None:  # noqa: ANN001 - an Outcome
    small = shrink(settings, outcome)
    print(
        f"cut down from {len(outcome.actions)} to {len(small.actions)} actions: "
        + "; ".join(map(str, small.violations))
    )
    print("\n".join(small.trace))


if __name__ == "__main__":
    sys.exit(main())
