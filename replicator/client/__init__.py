"""The client core, MM2's ``connect-mirror-client`` counterpart: replication policies, the exact
offset mapping and translation, the provenance header, reading the state log and a group's
committed offsets. No flow runtime, no metrics server, no Spark: a consumer application that
fails over and every Spark worker that decodes events import only this (and ``replicator.events``).
"""
