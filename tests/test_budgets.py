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
    with pytest.raises(BudgetError, match=r"smallest feasible budget 12 B"):
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


# ---------------------------------------------------------------- the one budget grammar (issue 23.8)
GRAMMAR_OK = [  # spelling, bytes against a keep-all peak of 1000 B
    (2, 2), (123, 123), ("123", 123), (" 100 ", 100), ("+5", 5), (np.int64(4096), 4096),
    (1, 1000), ("1", 1000), (1.0, 1000), ("1.0", 1000), (0.5, 500), ("0.5", 500), (np.float64(0.25), 250),
    (".1", 100), (0.1, 100), (0.001, 1), ("1e-3", 1),
    ("50%", 500), ("100%", 1000), ("150%", 1500), ("0.05%", 1), ("12.5 %", 125),
    ("1B", 1), ("2KB", 2000), ("512MB", 512 * 10**6), ("1GB", 10**9), ("1TB", 10**12), ("1PB", 10**15),
    ("4EB", 4 * 10**18), ("1.5KiB", 1536), ("8GiB", 8 * 2**30), ("1TiB", 2**40), ("1PiB", 2**50),
    ("4EiB", 4 * 2**60), ("2G", 2 * 2**30), ("1k", 1024), ("3M", 3 * 2**20), ("1T", 2**40), ("1.5G", 3 * 2**29),
    ("2 gib", 2 * 2**30),
]
GRAMMAR_BAD = [  # spelling, what the message says
    (1.5, "ambiguous"), ("1.5", "ambiguous"), (2.0, "ambiguous"), ("2.0", "ambiguous"), ("1e3", "ambiguous"),
    (0, "positive"), ("0", "positive"), (0.0, "positive"), ("0%", "positive"), ("0GiB", "positive"),
    (-5, "positive"), ("-5", "positive"), (-0.5, "positive"), ("-50%", "positive"), ("0.1B", "positive"),
    (float("nan"), "not finite"), (float("inf"), "not finite"), (-float("inf"), "not finite"),
    ("nan", "cannot be read"), ("inf", "cannot be read"), ("", "empty"), ("   ", "empty"),
    ("abc", "cannot be read"), ("12XB", "unknown unit"), ("5 ZiB", "unknown unit"), ("1,5GB", "cannot be read"),
    ("5EB", "too large"), ("5EiB", "too large"), (2**63, "too large"), ("1e400", "too large"), (1e300, "too large"),
    ("1e30%", "too large"), ("1e-999999999", "positive"),
    (True, "not a budget"), (None, "not a budget"), ([], "not a budget"), (b"1GB", "not a budget"),
]


@pytest.mark.parametrize("spec, want", GRAMMAR_OK)
def test_budget_grammar_reads(spec, want):
    from hybrid_remat.budgets import parse_budget_spec

    assert parse_budget_spec(spec).resolve(1000) == want


@pytest.mark.parametrize("spec, why", GRAMMAR_BAD)
def test_budget_grammar_refuses_and_names_the_spelling(spec, why):
    from hybrid_remat.budgets import parse_budget_spec

    with pytest.raises(BudgetError, match=why) as info:
        parse_budget_spec(spec)
    assert repr(spec) in str(info.value)


def test_a_relative_budget_follows_the_graph_and_an_absolute_one_does_not():
    from hybrid_remat.budgets import parse_budget_spec

    g = chain(4, bytes=10)  # keep-all peak 20 B
    assert parse_budget(0.5, g) == parse_budget("0.5", g) == parse_budget("50%", g) == 10
    assert parse_budget(1, g) == parse_budget("100%", g) == 20 and parse_budget(2, g) == 2
    assert parse_budget_spec("50%").relative and not parse_budget_spec("2GB").relative
    with pytest.raises(BudgetError, match="no graph"):
        parse_budget("0.5")
    with pytest.raises(BudgetError, match="0 B"):
        parse_budget_spec("50%").resolve(0)


def test_every_door_reads_the_same_grammar(tmp_path, capsys):
    """solve, sweep, Problem and torch's budget_bytes agree on 0.5, '0.5' and '50%'; 1.5 is refused by each."""
    import networkx as nx

    from hybrid_remat.cli import main
    from hybrid_remat.generators import training_graph
    from hybrid_remat.sweep import sweep
    from hybrid_remat.testing import write_remat_graph

    g = training_graph(nx.path_graph(8, create_using=nx.DiGraph), name="mlp8")
    path = tmp_path / "c.json"
    write_remat_graph(g, path)
    want = parse_budget("50%", g)
    assert Problem.single(g, 0.5).budgets.tolist() == Problem.from_specs(g, [f"{g.cost_kinds[0]}=0.5"]).budgets.tolist() == [want]
    rows = sweep([str(path)], ["0.5", "50%"], solvers=["dtr"], jobs=1)
    rows = rows.to_dict("records") if hasattr(rows, "to_dict") else rows
    assert [r["budget_bytes"] for r in rows] == [want, want]
    try:
        from hybrid_remat.torch._result import budget_bytes
    except ImportError:
        budget_bytes = None
    if budget_bytes is not None:
        assert budget_bytes(0.5, g) == budget_bytes("0.5", g) == want
    for argv in (["solve", str(path), "--budget", "1.5", "--time-limit", "1"],
                 ["sweep", str(path), "--budgets", "1.5", "--out", str(tmp_path / "s.csv")],
                 ["simulate", str(path), str(path), "--budget", "1.5"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "'1.5' is ambiguous" in err, err
