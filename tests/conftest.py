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

