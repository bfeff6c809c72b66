"""What a flow has copied, proven and committed: the offset-sync decision (``offset_sync.py``), the
ledger that publishes syncs and gates commits on their durability (``sync_ledger.py``), the
commit modes (``commits.py``: at-least-once, exactly-once), and the syncs a killed process left
unwritten (``tail_recovery.py``)."""
