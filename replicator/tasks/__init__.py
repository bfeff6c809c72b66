"""The state tasks that run beside a flow's copy loop: checkpoints and group offset sync,
heartbeats, watermarks, config snapshots, audit windows; and ``observe`` (the tasks once, no copy).
"""
