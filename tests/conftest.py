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
