"""The cyclic garbage collector of a process that copies records.

Every consumed record is a ``confluent_kafka.Message``, a container the collector tracks, and a
batch allocates thousands of them (and their header lists) before any is freed. With CPython's
default thresholds (a young collection every 700 net allocations, older ones every 10 of those)
the collector ran several times per batch and now and then walked the whole heap: py-spy on a
replicator copying 1 KiB records put 29% of the copy thread's busy samples in ``gc_collect_main``
(none after this), though the whole process's CPU per record moved only ~2% (8.23 -> 8.07 us,
``bench/results/profile-2026-11-25-copy-gc.txt``). Records and their copies are freed by
reference counting as soon as a batch is done; the collector only has cycles to find in what the
runtime allocates now and then (exceptions, tasks' bookkeeping).

``tune_for_copying`` moves everything allocated so far (modules, configuration, clients) out of
the collector's sight (``gc.freeze``) and collects the young generation every ``young`` net
allocations instead of 700. It changes the whole process, so the process's owner calls it (the
``mirrorlake replicate`` command does, once its flows are wired); a library embedding the
``Replicator`` decides for itself.
"""

from __future__ import annotations

import gc

__all__ = ["tune_for_copying", "YOUNG_THRESHOLD"]

YOUNG_THRESHOLD = 50_000  # net allocations of tracked objects between young collections


def tune_for_copying(young: int = YOUNG_THRESHOLD) -> tuple[int, int, int]:
    """Freeze what exists and raise the young generation's threshold; returns the old thresholds."""
    old = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(young, old[1], old[2])
    return old
