"""Exact models: the staged Checkmate MILP on SCIP, its encoder/decoder,
brute-force optima for tiny graphs and the decomposition helpers."""

from .checkmate import (
    CheckmateFormulation,
    CheckmateModel,
    MemoryScale,
    build_checkmate_model,
    estimate_size,
    solve_r_opt,
    stage_starts,
)

__all__ = [
    "CheckmateFormulation", "CheckmateModel", "MemoryScale", "build_checkmate_model",
    "estimate_size", "solve_r_opt", "stage_starts",
]
