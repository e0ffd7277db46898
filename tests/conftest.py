"""Shared fixtures: paths to bundled datasets and the public benchmark graphs."""

import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATASETS = ROOT / "datasets"
SHARED_MOCCASIN = ROOT.parent / "shared" / "benchmarks" / "moccasin"


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
