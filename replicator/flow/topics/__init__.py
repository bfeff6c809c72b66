"""Which source topics a flow copies and what becomes of them: the selection and its remote
topics (``topic_follower.py``), topic ids and losses before copy (``topic_lives.py``), config and
ACL sync off the loop's thread (``metadata_sync.py`` over ``background.py``)."""
