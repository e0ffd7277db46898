"""The battery's standard problems: tiny, each with a known valid plan.

Examples
--------
>>> insts = standard_instances(multi_device=False)
>>> [i.name for i in insts][:3]
['chain6@100%', 'training9@100%', 'training9@tight']
>>> all(i.problem.graph.n <= 13 for i in insts)
True
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np

from .. import generators
from ..budgets import keep_all_peak
from ..graph import Graph
from ..plan import Plan, keep_all_plan, plan_from_order
from ..problem import Device, Problem, default_links
from ..simulate import simulate

__all__ = ["Instance", "standard_instances", "rescaled", "recompute_reach"]


@dataclass(frozen=True)
class Instance:
    """A standard problem with a known valid plan.

    Attributes
    ----------
    name : str
        E.g. ``"training9@tight"``.
    problem : Problem
    witness : Plan
        A valid plan for ``problem`` (proof that it is feasible; the
        incumbent given to formulations and improvers).
    full_budget : bool
        The budget is the keep-all peak (the reference order fits).
    """

    name: str
    problem: Problem
    witness: Plan
    full_budget: bool


def _training9() -> Graph:
    fwd = nx.DiGraph()
    for i, (b, c) in enumerate([(4, 2.0), (6, 3.0), (3, 1.0), (5, 2.0)]):
        fwd.add_node(i, bytes=b, cost=c)
    fwd.add_edges_from([(0, 1), (1, 2), (2, 3)])
    return generators.training_graph(fwd, name="training9")


def _blocks13() -> Graph:
    """A stem, two identical (wide, narrow) blocks and a head, with its backward pass: repeated blocks."""
    fwd = nx.DiGraph()
    for i, (b, c) in enumerate([(2, 1.0), (4, 2.0), (1, 1.0), (4, 2.0), (1, 1.0), (1, 1.0)]):
        fwd.add_node(i, bytes=b, cost=c)
        if i:
            fwd.add_edge(i - 1, i)
    return generators.training_graph(fwd, name="blocks13")


def standard_instances(*, multi_device: bool = True, makespan: bool = False) -> list[Instance]:
    """The battery's problems (small: at most 13 nodes each; one with repeated blocks).

    Tight budgets are the smallest feasible ones (a node with its inputs);
    the witness plans that reach them were found by exhaustive search over
    recomputation sets and are stored as compute sequences.  With
    ``makespan`` the CPU+GPU problems come a second time with the makespan
    objective (for objects that declare ``"makespan"``).
    """
    out = []
    ch = generators.chain(6, bytes=[3, 1, 4, 1, 5, 9], cost=[2.0, 7.0, 1.0, 8.0, 2.0, 8.0], name="chain6")
    tr = _training9()
    rd = generators.random_dag(10, p=0.3, seed=3)
    for g, tight_seq in ((ch, None), (tr, [0, 1, 2, 3, 4, 5, 6, 0, 1, 7, 0, 8]),
                         (rd, [0, 1, 2, 5, 4, 6, 7, 0, 3, 8, 1, 4, 9]),
                         (_blocks13(), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 11, 12])):
        peak = keep_all_peak(g)
        out.append(Instance(f"{g.name}@100%", Problem.single(g, peak), keep_all_plan(g, "cost"), True))
        if tight_seq is not None:
            w = plan_from_order(g, tight_seq, "cost")
            budget = simulate(Problem.single(g, peak), w).peak_bytes["cost"]
            out.append(Instance(f"{g.name}@tight", Problem.single(g, budget), w, False))
    if multi_device:
        g2 = generators.random_dag(8, p=0.35, seed=5, kinds=("gpu", "cpu"))
        peak = keep_all_peak(g2)
        links = default_links(g2, ["gpu", "cpu"])
        full = Problem(g2, [Device("gpu", "gpu", peak), Device("cpu", "cpu", 4 * peak)], links)
        out.append(Instance(f"{g2.name}/gpu+cpu@100%", full, keep_all_plan(g2, "gpu"), True))
        tight_gpu = max(int(np.max(g2.bytes)), int(0.5 * peak))
        tight = Problem(g2, [Device("gpu", "gpu", tight_gpu), Device("cpu", "cpu", 4 * peak)], links, check=False)
        cpu_plan = keep_all_plan(g2, "cpu")
        out.append(Instance(f"{g2.name}/gpu+cpu@tight", tight, cpu_plan, False))
        if makespan:
            out += [Instance(f"{g2.name}/gpu+cpu@100%/makespan", full.with_objective("makespan"),
                             keep_all_plan(g2, "gpu"), True),
                    Instance(f"{g2.name}/gpu+cpu@tight/makespan", tight.with_objective("makespan"), cpu_plan, False)]
    for inst in out:  # the battery's own premise: every witness is valid
        r = simulate(inst.problem, inst.witness)
        assert r.valid, f"internal: witness of {inst.name} invalid: {r.error}"
    return out


def rescaled(graph: Graph, rng: np.random.Generator, *, huge_bytes: bool = False) -> Graph:
    """``graph`` with every cost multiplied by ``10 ** u``, ``u`` drawn
    uniformly in [-12, 12] from ``rng`` (one draw), and with ``huge_bytes``
    its bytes multiplied so that they sum to about 5e17: the rescaled
    instances on which a bound must stay below the brute-force optimum.

    Examples
    --------
    >>> g = rescaled(generators.chain(4, bytes=2), np.random.default_rng(0), huge_bytes=True)
    >>> int(np.sum(g.bytes)) <= 5 * 10**17 < 2 * int(np.sum(g.bytes))
    True
    """
    scale = 10.0 ** rng.uniform(-12, 12)
    g = graph.with_costs({kind: graph.cost(kind) * scale for kind in graph.cost_kinds})
    if huge_bytes:
        nbytes = np.asarray(g.bytes, dtype=np.int64) * (5 * 10**17 // max(1, int(np.sum(g.bytes))))
        g = Graph.from_arrays(nbytes, [tuple(e) for e in g.edges().tolist()], {k: g.cost(k) for k in g.cost_kinds})
    return g


def recompute_reach(graph: Graph, seq, stage) -> list[tuple[int, int]]:
    """``(j, k)`` for each second computation of a value in a compute
    sequence: ``j`` the stage of the value, ``k`` the stage of the next
    backward node after it (the backward the recomputation serves);
    ``stage``: a stage per node (e.g. ``BlockStructure.stage``).  Checks of
    plan classes that bound how far back a recomputation reaches (a
    checkpoint every few blocks) assert on these pairs.

    >>> from hybrid_remat.generators import chain
    >>> g = chain(2)
    >>> recompute_reach(g, [0, 1], np.zeros(g.n, dtype=int))
    []
    """
    seq = [int(v) for v in seq]
    seen = np.zeros(graph.n, dtype=np.int64)
    pairs = []
    for i, v in enumerate(seq):
        seen[v] += 1
        if seen[v] == 2:
            nxt = next((u for u in seq[i + 1:] if graph.phase[u] != 0), None)
            if nxt is None:
                raise ValueError(f"the recomputation of node {v} at step {i} serves no backward node")
            pairs.append((int(stage[v]), int(stage[nxt])))
    return pairs
