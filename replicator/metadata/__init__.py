"""Topic metadata of a flow: which topics it mirrors (filters), creating remote topics and
following partition increases, topic config sync and ACL sync with MM2's rules.
"""
