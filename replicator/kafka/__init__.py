"""Kafka plumbing shared by every part that talks to a cluster: the librdkafka settings of each
kind of client, connectivity checks with a bounded retry, and the writer of the state topic.
"""
