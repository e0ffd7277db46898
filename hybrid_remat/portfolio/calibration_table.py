"""Measured figures of the built-in components (written by
``benchmarks/portfolio_calibration.py``; do not edit by hand).

``TABLE[name] = {"kind", "c", "k", "value", "sizes"}``: predicted seconds
``c * n**k`` on a graph of ``n`` nodes, ``value`` the win rate (heuristics:
share of instances where its plan was within 0.1% of the best heuristic
plan; bounds: share where it beat the trivial bound; improvers: share where
it improved the best heuristic plan), ``sizes`` the node counts measured.
"""

__all__ = ["TABLE"]

TABLE: dict = {}
