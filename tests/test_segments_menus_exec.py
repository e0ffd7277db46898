"""The segment menus' executors (hybrid_remat.segments.menu_exec): the
portfolio's forked workers and Ray tasks give the serial computation's
menus for the same limits (node limits, no deadline); menus not back by the
deadline, stopped or failed fall back to the greedy menu, every stage keeps
a valid menu and nothing is left running; the portfolio's worker count
reaches the segment solver.  Ray: tests/test_segments_menus_ray.py (its
runtime's start alone takes 10-18 s here)."""

from __future__ import annotations

import multiprocessing as mp
import threading
import time

import networkx as nx
import numpy as np
import pytest

from hybrid_remat.families import random_layered_training, unet
from hybrid_remat.generators import training_graph
from hybrid_remat.limits import Limits
from hybrid_remat.problem import Problem
from hybrid_remat.segments import menu_exec
from hybrid_remat.segments.chain import segment_chain
from hybrid_remat.segments.menu_exec import PoolMenus, RayMenus, executor_for
from hybrid_remat.segments.menus import compute_menus, greedy_menu, menu_tasks
from hybrid_remat.segments.solver import solve_segments
from hybrid_remat.simulate import simulate

NODES = Limits(nodes=100)


def _tasks(graph, **kw):
    p = Problem.single(graph, "50%")
    return p, menu_tasks(p, segment_chain(graph, **kw))


@pytest.fixture(scope="module")
def cases():
    """Small graphs of three kinds (U-Net, random layered, a path), their tasks and serial menus."""
    out = []
    for g, kw in ((unet(600, 0), {}), (random_layered_training(200, 1), {}),
                  (training_graph(nx.path_graph(24, create_using=nx.DiGraph)), {"segment_size": 4})):
        _, tasks = _tasks(g, **kw)
        out.append((tasks, compute_menus(tasks, limits=NODES)))
    return out


def _same(a: dict, b: dict) -> None:
    assert list(a) == list(b)           # every stage's key, in the tasks' order
    for k, m in a.items():
        o = b[k]
        assert m.held == o.held and m.extra == o.extra and m.exact == o.exact, k
        assert len(m.options) == len(o.options) and all(np.array_equal(x, y) for x, y in zip(m.options, o.options))
        assert m.stats == o.stats, k


def _valid(task, m) -> None:
    """A menu of the task's stage: keep masks over its forward nodes, fixed values always held, most memory first."""
    assert m.options and all(x.shape == task.needed.shape and x.dtype == bool for x in m.options)
    assert all(x[task.fixed].all() for x in m.options)
    assert all(h == int(task.size[x].sum()) for h, x in zip(m.held, m.options))
    assert m.held == sorted(m.held, reverse=True)


def test_the_pool_gives_the_serial_menus(cases):
    assert sum(len(t) for t, _ in cases) >= 15
    for tasks, serial in cases:
        assert all(m.exact for m in serial.values())        # the exact solves finish: the menus are comparable
        ex = PoolMenus(2)
        _same(serial, compute_menus(tasks, limits=NODES, executor=ex))
        assert ex.stats["executor"] == "pool" and ex.stats["fallback"] == 0 and ex.stats["returned"] == len(tasks)
    assert not mp.active_children()


def _slow_for(key, real):
    def slow(task, **kw):
        if task.key == key:
            time.sleep(60)
        return real(task, **kw)
    return slow


def test_menus_not_back_by_the_deadline_are_the_greedy_ones(cases, monkeypatch):
    tasks, serial = cases[2]
    late = tasks[1].key
    monkeypatch.setattr(menu_exec, "compute_menu", _slow_for(late, menu_exec.compute_menu))  # the forked workers inherit it
    ex = PoolMenus(2)
    got = compute_menus(tasks, limits=Limits.seconds(2.5, nodes=100), exact_share=1.0, executor=ex)
    assert list(got) == [t.key for t in tasks]
    assert got[late].stats["kind"] == "greedy" and "fallback" in got[late].stats
    _same({late: greedy_menu(tasks[1])}, {late: _without_fallback(got[late])})
    _same({k: m for k, m in serial.items() if k != late}, {k: m for k, m in got.items() if k != late})
    for t in tasks:
        _valid(t, got[t.key])
    assert ex.stats["fallback"] == 1 and ex.stats["killed"] == 1
    assert not mp.active_children()     # the worker that overran is killed


def _without_fallback(m):
    m.stats = {k: v for k, v in m.stats.items() if k != "fallback"}
    return m


def test_the_stop_flag_ends_the_menus(cases, monkeypatch):
    tasks, _ = cases[2]
    monkeypatch.setattr(menu_exec, "compute_menu", _slow_for(tasks[0].key, menu_exec.compute_menu))
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    got = compute_menus(tasks, limits=Limits(stop=stop, nodes=100), executor=PoolMenus(2))
    assert got[tasks[0].key].stats.get("fallback")
    for t in tasks:
        _valid(t, got[t.key])
    assert not mp.active_children()


def test_a_failed_menu_is_the_greedy_one(cases, monkeypatch):
    tasks, serial = cases[2]
    real = menu_exec.compute_menu

    def broken(task, **kw):
        if task.key == tasks[0].key:
            raise RuntimeError("boom")
        return real(task, **kw)

    monkeypatch.setattr(menu_exec, "compute_menu", broken)
    got = compute_menus(tasks, limits=NODES, executor=PoolMenus(2))
    assert "boom" in got[tasks[0].key].stats["fallback"]
    _same({k: m for k, m in serial.items() if k != tasks[0].key}, {k: m for k, m in got.items() if k != tasks[0].key})


def test_the_limits_choose_the_executor():
    assert executor_for(Limits()) is None and executor_for(Limits(workers=1)) is None
    assert isinstance(executor_for(Limits(workers=3)), PoolMenus) and executor_for(Limits(workers=3)).workers == 3
    r = RayMenus("auto")
    assert executor_for(Limits(workers=3), r) is r
    assert Limits(workers=2).share(1.0).workers == 2


def test_the_solver_on_the_pool_plans_as_in_this_process():
    g = training_graph(nx.path_graph(24, create_using=nx.DiGraph))
    p1, p2 = Problem.single(g, "50%"), Problem.single(g, "50%")
    ch = segment_chain(g, segment_size=4)
    a = solve_segments(p1, chain=ch, limits=NODES)
    b = solve_segments(p2, chain=ch, limits=Limits(nodes=100, workers=2))
    assert "menu_executor" not in a.stats and b.stats["menu_executor"]["executor"] == "pool"
    assert b.plan is not None and simulate(p2, b.plan).valid
    assert a.choice == b.choice and a.objective == b.objective


def test_the_portfolio_workers_reach_the_menus():
    from hybrid_remat.anytime import anytime_solve

    g = random_layered_training(200, 1)
    r = anytime_solve(Problem.single(g, "50%"), 2.0, workers=2, heuristics=["dtr_belady"], bounds=[], improvers=[],
                      formulations=["segments"], node_limit=50)
    assert r.plan is not None and simulate(Problem.single(g, "50%"), r.plan).valid
    st = r.stats["formulations"]["segments"]["solver"]["menu_executor"]     # it ran in a portfolio worker
    assert st["executor"] == "pool" and st["workers"] == 2
    assert not mp.active_children()
