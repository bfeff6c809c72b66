"""The flow runtime: the copy loop of one ``source->target`` flow, the offset-sync ledger,
where source positions are committed (at-least-once, exactly-once), and ``Replicator`` running
every enabled flow with its metrics and health endpoint.
"""
