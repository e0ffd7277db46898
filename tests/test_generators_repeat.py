"""repeat_layers: deeper copies of a layered training graph."""

import pathlib

import numpy as np
import pytest

from hybrid_remat.budgets import keep_all_peak
from hybrid_remat.errors import GraphError
from hybrid_remat.generators import chain, repeat_layers
from hybrid_remat.loaders import load_graph

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def llama():
    return load_graph(str(ROOT / "datasets" / "llama_8l_b4_s512.json.gz"))


def test_same_depth_reproduces_the_structure(llama):
    g8 = repeat_layers(llama, 8)
    assert g8.n == llama.n and g8.m == llama.m
    assert np.array_equal(g8.succ_ptr, llama.succ_ptr) and np.array_equal(g8.succ_idx, llama.succ_idx)
    assert np.array_equal(g8.bytes, llama.bytes)
    assert keep_all_peak(g8) == keep_all_peak(llama)
    assert np.array_equal(g8.required, llama.required)


@pytest.mark.parametrize("layers", [1, 2, 5, 20])
def test_each_layer_adds_one_block(llama, layers):
    g = repeat_layers(llama, layers)
    g1 = repeat_layers(llama, 1)
    per_layer = (llama.n - g1.n) // 7
    assert g.n == g1.n + (layers - 1) * per_layer
    assert int(g.required.sum()) == int(g1.required.sum()) + (layers - 1) * 9
    # forward nodes first, then backward; every copy of the block has the same sizes
    assert (np.diff(g.phase.astype(int)) >= 0).all()
    assert g.meta["meta"]["layers"] == layers


def test_no_block_is_an_error(llama):
    with pytest.raises(GraphError, match="not forward nodes followed by backward"):
        repeat_layers(chain(20), 4, layers=8)
    with pytest.raises(GraphError, match="no block repeated 9 times"):
        repeat_layers(llama, 4, layers=9)
