"""MirrorMaker 2 compatibility: MM2's internal records (Struct encoding) decoded and encoded, mapped to
mirrorlake events, ``import-mm2`` republishing them into the state topic, MM2's records written for
MM2's own clients (``writer``), and ``takeover-mm2`` starting a flow where MM2 stopped.
"""
