"""Least privilege: the ACLs each feature and each operator's command needs (``acl_needs.py``, the
table as code) and asking a cluster which of them a principal holds (``permissions.py``, behind
``mirrorlake check --for`` and every command's "grant: ..." error)."""
