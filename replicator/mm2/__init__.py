"""MirrorMaker 2 compatibility: MM2's internal records (Struct encoding) decoded, mapped to
mirrorlake events, and ``import-mm2`` republishing them into the state topic.
"""
