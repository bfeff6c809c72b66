"""A deterministic simulator of one at-least-once flow's processes, driving the flow's own core.

FoundationDB and TigerBeetle prove their recovery logic by running the real code against simulated
networks, disks and clocks under millions of seeded fault schedules; Kafka's ``RaftEventSimulationTest``
does it for KRaft. This does it for a flow's ownership and resume logic: the decisions are
``replicator.flow.core``'s (``Ownership``, ``plan_takeover``, ``PreviousRun``, ``SyncLedger``), the
same code the runner performs with real clients; around them, in memory and single-threaded:

- ``logs``: the source partitions (records, transaction markers, aborted records) and the target's
  (each copy knows which source record it is and which process wrote it: the truth);
- ``group``: the consumer group's coordinator (joins, cooperative revoke-then-assign, session
  expiry without a revoke, commits refused while the coordinator is away);
- ``state_topic``: the state topic, whose writes land only when acknowledged;
- ``process``: one replicator process, the runner's sequence of calls as a generator that yields at
  every point where the real one waits (an acknowledgement, a rebalance callback, the next turn of
  its loop): a kill lands between any two;
- ``world``: the seeded schedule (producers, acknowledgements, processes started, stopped, killed,
  frozen, sessions expiring, the coordinator away), replayable action by action;
- ``checks``: invariants against the model's truth, never against the core's own figures;
- ``shrink``: a failing schedule cut down to the actions it needs, printed as a trace.

``python -m mirrorlake.simulation --help`` runs it; ``tests/test_simulation.py`` runs saved seeds
and fresh ones in ``make test``.
"""

from mirrorlake.simulation.world import Outcome, SimSettings, explore, run_schedule, run_seed

__all__ = ["Outcome", "SimSettings", "explore", "run_schedule", "run_seed"]
