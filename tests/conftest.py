"""Shared fixtures: paths to bundled datasets and the public benchmark graphs."""

import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATASETS = ROOT / "datasets"
SHARED_MOCCASIN = ROOT.parent / "shared" / "benchmarks" / "moccasin"


def tiny_training(seed: int, n: int = 5):
    """A random forward DAG of ``n`` nodes (a chain plus random skips, integer
    bytes and costs) as a training graph: small enough for brute force."""
    import networkx as nx
    import numpy as np

    from hybrid_remat.generators import training_graph

    rng = np.random.default_rng(seed)
    fw = nx.DiGraph()
    for v in range(n):
        fw.add_node(v, bytes=int(rng.integers(1, 5)), cost=float(rng.integers(1, 6)))
        if v:
            fw.add_edge(v - 1, v)
        if v >= 2 and rng.random() < 0.4:
            fw.add_edge(int(rng.integers(0, v - 1)), v)
    return training_graph(fw)


@pytest.fixture
def tiny_training_graph():
    """:func:`tiny_training`, as a fixture (``tiny_training_graph(seed, n)``)."""
    return tiny_training


@pytest.fixture
def datasets_dir():
    return DATASETS


@pytest.fixture
def moccasin_dir():
    if not SHARED_MOCCASIN.is_dir():
        pytest.skip("../shared/benchmarks/moccasin is not present")
    return SHARED_MOCCASIN



@pytest.fixture(autouse=True)
def builtin_plugins_only(monkeypatch):
    """Tests under tests/ see the built-ins only (as datasette's do): installed
    third-party plugins (e.g. the OR-Tools formulation) would otherwise join
    every anytime_solve.  Tests of entry-point discovery turn autoload back on."""
    from hybrid_remat import plugins

    monkeypatch.setenv(plugins.DISABLE_ENV, "1")
    plugins.reset()
    yield
    plugins.reset()


@pytest.fixture(autouse=True)
def signals_as_in_a_terminal():
    """Every test runs with Python's own SIGINT handler and the default
    SIGTERM, whatever the suite was started with (a background job of a
    script starts with SIGINT ignored, and then neither this process nor the
    commands the tests start would see a Ctrl-C: issue 23.9).  Restored after."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)  # children then start with SIG_DFL: Python's own
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for s, h in saved.items():
        signal.signal(s, h if h is not None else signal.SIG_DFL)
