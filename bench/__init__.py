"""Benchmarks (not tests): each script prints ratios measured side by side in one run.

Run them as modules from the repository root, e.g. ``.venv/bin/python -m bench.replicate_vs_mm2``.
See ``bench/README.md``.
"""
