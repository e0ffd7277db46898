"""A well-behaved third-party plugin used by the tests: one object of each kind."""

import numpy as np

from hybrid_remat import hookimpl
from hybrid_remat.errors import GraphError, HybridRematError
from hybrid_remat.graph import Graph
from hybrid_remat.interfaces import CostModel, Formulation, FormulationResult, Heuristic, Loader
from hybrid_remat.plan import keep_all_plan
from hybrid_remat.simulate import simulate


class ReferenceOrder(Heuristic):
    name = "fixture_reference"
    version = "1.0"
    capabilities = frozenset({"dag", "chain", "single_device"})
    rank = 1.0

    def run(self, problem, *, seed=0):
        plan = keep_all_plan(problem.graph, problem.primary.name)
        return plan if simulate(problem, plan).valid else None


class EchoIncumbent(Formulation):
    """Returns the incumbent it is given (a 'formulation' with no model)."""

    name = "fixture_echo"
    version = "1.0"
    capabilities = frozenset({"dag", "chain", "single_device"})

    def solve(self, problem, *, incumbent=None, time_limit=60.0, node_limit=None, seed=0, threads=1,
              on_incumbent=None, on_bound=None, stop=None):
        if incumbent is None:
            return FormulationResult("no_solution")
        try:
            r = simulate(problem, incumbent)
        except HybridRematError:
            return FormulationResult("no_solution")
        if not r.valid:
            return FormulationResult("no_solution")
        if on_incumbent is not None:
            on_incumbent(incumbent, "fixture_echo")
        return FormulationResult("feasible", incumbent, r.total_time, float(problem.graph.cost(problem.primary.kind).sum()))


class UnitCost(CostModel):
    name = "fixture_unit"
    version = "1.0"
    capabilities = frozenset({"analytic"})

    def devices(self):
        return ["unit"]

    def estimate(self, graph, device):
        if device != "unit":
            raise GraphError(f"fixture_unit knows only device 'unit', not {device!r}")
        return np.ones(graph.n)


class EdgeListLoader(Loader):
    """Text format: first line ``edgelist-v1 <name>``, then ``bytes cost`` per node, ``--``, then ``u v`` per edge."""

    name = "fixture_edgelist"
    version = "1.0"
    capabilities = frozenset()

    def sniff(self, path, head):
        return head.startswith(b"edgelist-v1")

    def save(self, graph, path):
        kind = graph.cost_kinds[0]
        with open(path, "w") as f:
            f.write(f"edgelist-v1 {graph.name} {kind}\n")
            for b, c in zip(graph.bytes.tolist(), graph.cost(kind).tolist(), strict=True):
                f.write(f"{b} {c!r}\n")
            f.write("--\n")
            for u, v in graph.edges().tolist():
                f.write(f"{u} {v}\n")

    def load(self, path):
        try:
            with open(path) as f:
                lines = f.read().splitlines()
            _, name, kind = lines[0].split()
            cut = lines.index("--")
            rows = [x.split() for x in lines[1:cut]]
            edges = [tuple(map(int, x.split())) for x in lines[cut + 1:] if x.strip()]
            return Graph.from_arrays([int(r[0]) for r in rows], edges, {kind: [float(r[1]) for r in rows]}, name=name)
        except (ValueError, IndexError, UnicodeDecodeError) as e:
            raise GraphError(f"{path}: not an edgelist-v1 file: {e}") from None


@hookimpl
def hybrid_remat_register_heuristics():
    return [ReferenceOrder()]


@hookimpl
def hybrid_remat_register_formulations():
    return [EchoIncumbent()]


@hookimpl
def hybrid_remat_register_cost_models():
    return [UnitCost()]


@hookimpl
def hybrid_remat_register_loaders():
    return [EdgeListLoader()]
