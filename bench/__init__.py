"""Benchmarks of stratalog (not tests: they print figures, they never assert on time).

``python -m bench.storage`` runs the storage benchmarks of issue 2; see ``bench/README.md``.
"""
