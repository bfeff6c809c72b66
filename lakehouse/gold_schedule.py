"""Running the gold tables of one build side by side, each once the gold tables it reads are done.

An incremental build of a few touched keys spends most of its time waiting: Delta log reads,
small Spark jobs, a MERGE's commit, one table after another. Tables that do not read each other
(``GoldTable.depends_on``) overlap well on Spark's threads, so a build runs up to ``workers`` of
them at a time (Spark takes jobs from several threads of one session); a table starts only after
every table it reads has committed, so each still reads its inputs as a sequential build would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

from lakehouse.gold import GoldTable

__all__ = ["run_in_dependency_order"]

R = TypeVar("R")


def run_in_dependency_order(
    tables: Sequence[GoldTable],
    run: Callable[[GoldTable], R],
    *,
    workers: int,
    on_start: Callable[[GoldTable], None] | None = None,
) -> list[R]:
    """``run(table)`` for every table, up to ``workers`` at once, each after its ``depends_on``.

    Returns the results in the order of ``tables``. When a table fails, no further table starts,
    the running ones finish, and the first failure is raised (tables that committed stay so: a
    rerun of the build carries on from their state, as after a crash).
    """
    results: dict[str, R] = {}
    pending = list(tables)
    running: dict[Future[R], GoldTable] = {}
    failure: BaseException | None = None
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gold") as pool:
        while pending or running:
            if failure is None:
                for table in [t for t in pending if set(t.depends_on) <= results.keys()]:
                    if len(running) >= workers:
                        break
                    pending.remove(table)
                    if on_start is not None:
                        on_start(table)
                    running[pool.submit(run, table)] = table
            if not running:
                break  # a failure stopped the tables that wait for it
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                table = running.pop(future)
                try:
                    results[table.name] = future.result()
                except BaseException as exc:  # re-raised below, once the running tables have finished
                    failure = failure or exc
    if failure is not None:
        raise failure
    return [results[t.name] for t in tables]
