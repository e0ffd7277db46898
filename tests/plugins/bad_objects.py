"""Objects that break the contract in different ways, next to one good one."""

from hybrid_remat import hookimpl
from hybrid_remat.interfaces import Heuristic


class NoName:
    version = "1"

    def run(self, problem, *, seed=0):
        return None


class NoRun:
    name = "fixture_no_run"
    version = "1"


class StringCaps(Heuristic):
    name = "fixture_string_caps"
    capabilities = "dag"

    def run(self, problem, *, seed=0):
        return None


class Fine(Heuristic):
    name = "fixture_fine"

    def run(self, problem, *, seed=0):
        return None


@hookimpl
def hybrid_remat_register_heuristics():
    return [NoName(), NoRun(), StringCaps(), Fine()]


@hookimpl
def hybrid_remat_register_formulations():
    return "not a list"
