"""The segment menus as Ray tasks (hybrid_remat.segments.menu_exec.RayMenus):
a real local runtime (2 CPUs) gives the serial computation's menus for the
same node limits and is shut down after; without Ray, a clear error.
(Apart from tests/test_segments_menus_exec.py: the runtime's start alone
takes 10-18 s on 2 loaded cores.)"""

from __future__ import annotations

import sys

import networkx as nx
import pytest
from test_segments_menus_exec import NODES, _same  # noqa: E402  (tests/ is on sys.path)

from hybrid_remat.errors import HybridRematError
from hybrid_remat.generators import training_graph
from hybrid_remat.problem import Problem
from hybrid_remat.segments.chain import segment_chain
from hybrid_remat.segments.menu_exec import RayMenus
from hybrid_remat.segments.menus import compute_menus, menu_tasks


@pytest.fixture(scope="module")
def case():
    g = training_graph(nx.path_graph(24, create_using=nx.DiGraph))
    tasks = menu_tasks(Problem.single(g, "50%"), segment_chain(g, segment_size=4))
    return tasks, compute_menus(tasks, limits=NODES)


@pytest.mark.slow
def test_ray_tasks_give_the_serial_menus(case):
    ray = pytest.importorskip("ray")
    assert not ray.is_initialized()
    tasks, serial = case
    ex = RayMenus(True, num_cpus=2)
    _same(serial, compute_menus(tasks, limits=NODES, executor=ex))
    assert ex.stats["fallback"] == 0 and ex.stats["started_runtime"]
    assert not ray.is_initialized()     # the runtime it started is shut down


def test_ray_absent_is_a_clear_error(case, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(HybridRematError, match="Ray is not installed"):
        compute_menus(case[0], limits=NODES, executor=RayMenus())
