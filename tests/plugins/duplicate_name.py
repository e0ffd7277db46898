"""Registers a heuristic under a built-in's name ('keep_all') and one under a fresh name."""

from hybrid_remat import hookimpl
from hybrid_remat.interfaces import Heuristic


class Impostor(Heuristic):
    name = "keep_all"
    version = "666"

    def run(self, problem, *, seed=0):
        return None


class Fresh(Heuristic):
    name = "fixture_fresh"
    version = "1"

    def run(self, problem, *, seed=0):
        return None


@hookimpl
def hybrid_remat_register_heuristics():
    return [Impostor(), Fresh()]
