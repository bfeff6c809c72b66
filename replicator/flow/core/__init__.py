"""The flow's decisions, with no I/O, no thread and no clock of their own.

What a flow does when the group hands it partitions, when it takes over a killed peer's copies,
where it resumes and whether its stop is clean is decided here, from what happened (assignments,
revocations, the state log's events, the clusters' logs read through a port) and returned as what
to do. ``replicator.flow.runner`` performs those decisions with real clients; the deterministic
simulator (``mirrorlake.simulation``) performs the same decisions against an in-memory model of
clusters, group and state topic, with a seeded schedule of crashes, and checks every outcome
against the model's own truth.

- ``logs``: the port through which a decision reads a cluster's partitions (``PartitionLogs``).
- ``matching``: copies found on the target by content, and the offset syncs that prove them.
- ``resume``: where a partition resumes after a crash (``resume_point``) and which runs ended in
  one (``PreviousRun``).
- ``takeover``: the recovery of a partition handed over (``plan_takeover``).
- ``ownership``: which partitions the process holds, holds back, must commit, and whether its stop
  is clean (``Ownership``).
"""
