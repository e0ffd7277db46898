import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_remat.budgets import keep_all_peak, min_feasible_budget, parse_budget
from hybrid_remat.core.sequence import sequence_peak_kernel
from hybrid_remat.errors import BudgetError
from hybrid_remat.generators import chain, random_dag
from hybrid_remat.loaders import load_graph
from hybrid_remat.problem import Problem

# no-remat peaks of the public benchmark graphs (../shared/benchmarks/moccasin/README.md)
PUBLISHED_PEAKS = {
    "rlg_n100.json": 46_319,
    "rlg_n250.json": 146_840,
    "rlg_n500.json": 284_439,
    "rlg_n1000.json": 608_619,
    "fcn_8_vgg_b32_416x608_train.json": 13_484_795_520,
    "resnet50_b256_224x224_train.json": 38_059_356_160,
}
PUBLISHED_BUDGETS = {  # B @ 0.9, B @ 0.8
    "rlg_n100.json": (41_688, 37_056),
    "rlg_n250.json": (132_156, 117_472),
    "rlg_n500.json": (255_996, 227_552),
    "rlg_n1000.json": (547_758, 486_896),
    "fcn_8_vgg_b32_416x608_train.json": (12_136_315_968, 10_787_836_416),
    "resnet50_b256_224x224_train.json": (34_253_420_544, 30_447_484_928),
}


@pytest.mark.parametrize("fname", sorted(PUBLISHED_PEAKS))
def test_keep_all_peak_reproduces_published_moccasin_peaks(moccasin_dir, fname):
    g = load_graph(moccasin_dir / fname)
    assert keep_all_peak(g) == PUBLISHED_PEAKS[fname]
    assert parse_budget("90%", g) == PUBLISHED_BUDGETS[fname][0]
    assert parse_budget("80%", g) == PUBLISHED_BUDGETS[fname][1]


def _brute_peak(g):
    last = [max([v] + list(g.succs(v))) for v in range(g.n)]
    peak = 0
    for j in range(g.n):
        live = sum(int(g.bytes[u]) for u in range(j) if last[u] >= j) + int(g.bytes[j])
        peak = max(peak, live)
    return peak


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 25), st.floats(0.05, 0.8), st.integers(0, 10_000))
def test_keep_all_peak_matches_definition(n, p, seed):
    g = random_dag(n, p=p, seed=seed)
    assert keep_all_peak(g) == _brute_peak(g)
    py_peak = getattr(sequence_peak_kernel, "py_func", sequence_peak_kernel)
    assert py_peak(np.arange(g.n), np.ones(g.n, dtype=bool), g.bytes, g.pred_ptr, g.pred_idx) == keep_all_peak(g)


def test_min_feasible_budget_definition():
    g = random_dag(15, p=0.4, seed=1)
    want = max(int(g.bytes[v]) + sum(int(g.bytes[u]) for u in g.preds(v)) for v in range(g.n))
    assert min_feasible_budget(g) == want


@pytest.mark.parametrize(
    "text, value",
    [("8GiB", 8 * 2**30), ("512MB", 512 * 10**6), ("1.5KiB", 1536), (" 100 ", 100), (123, 123), ("2G", 2 * 2**30)],
)
def test_parse_budget_sizes(text, value):
    assert parse_budget(text) == value


def test_parse_budget_percent_is_ceil():
    g = chain(3, bytes=[3, 4, 0])  # keep-all peak 7
    assert keep_all_peak(g) == 7
    assert parse_budget("50%", g) == math.ceil(3.5)
    assert parse_budget("100%", g) == 7


@pytest.mark.parametrize("bad", ["abc", "-5", "0", "12XB", "80%", True, None, [], float("nan")])
def test_parse_budget_rejects(bad):
    with pytest.raises(BudgetError):
        parse_budget(bad)


def test_problem_rejects_budget_below_smallest_feasible_with_number():
    g = chain(4, bytes=[5, 7, 1, 1])  # need at node 1: 12
    with pytest.raises(BudgetError, match=r"below the node bound 12 B \(12 B\), a lower bound on the smallest feasible budget"):
        Problem.single(g, 11)
    assert Problem.single(g, 12).budgets.tolist() == [12]


def test_problem_unknown_cost_kind():
    g = chain(3)
    with pytest.raises(BudgetError, match="cost kind 'gpu'"):
        Problem.single(g, 10, kind="gpu")


def test_profiled_null_cpu_times_filled_and_flagged(datasets_dir):
    g = load_graph(datasets_dir / "vgg16_b16.json.gz")
    est = g.estimated["cpu"]
    assert est.sum() == 4
    gpu, cpu = g.cost("gpu"), g.cost("cpu")
    ok = ~est & (gpu > 0)
    ratio = float(np.median(cpu[ok] / gpu[ok]))
    assert np.allclose(cpu[est], gpu[est] * ratio)
    assert np.isfinite(cpu).all()


@pytest.mark.parametrize("huge", ["1e400", 1e300, 2**63, "1e999999999", "8EB" if False else "9000000TiB", "1e30%"])
def test_parse_budget_rejects_budgets_beyond_int64_sums(huge):
    g = chain(3, bytes=10)
    with pytest.raises(BudgetError, match="too large"):
        parse_budget(huge, g)
    assert parse_budget("4EiB".replace("E", "T"), g) == 4 * 2**40


def test_budget_lower_bound_is_the_old_figure_under_its_own_name():
    from hybrid_remat.budgets import budget_lower_bound

    g = random_dag(15, p=0.4, seed=1)
    assert budget_lower_bound(g) == min_feasible_budget(g)
    assert "lower bound" in min_feasible_budget.__doc__ and "lower bound" in budget_lower_bound.__doc__
