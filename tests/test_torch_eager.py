"""PyTorch frontend, eager step: per-layer checkpointing completed by the
layers' surroundings (the region search's fill family), deterministic
choice given a seed, and the zoo's crash loop."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import hybrid_remat.torch as hrt  # noqa: E402

pytestmark = pytest.mark.torch
torch.set_num_threads(1)


class Layer(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.a, self.b = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.b(torch.nn.functional.gelu(self.a(x)))


class Body(nn.Module):
    def __init__(self, d, n):
        super().__init__()
        self.layers = nn.ModuleList(Layer(d) for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class Stemmed(nn.Module):
    """A BERT-like shape: a stem (normalisation of a wide projection) at
    depth 1, the layers at depth 3, so no depth pool holds both."""

    def __init__(self, d=32, n=4):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(d, d), nn.LayerNorm(d), nn.Tanh())
        self.body = Body(d, n)
        self.head = nn.Linear(d, 1)

    def forward(self, x):
        return self.head(self.body(self.stem(x)))


def _stemmed():
    torch.manual_seed(0)
    return Stemmed(), torch.randn(64, 32)


def test_per_layer_regions_over_the_budget_are_completed_by_their_surroundings():
    from hybrid_remat.torch._planner import _problem
    from hybrid_remat.torch._region_search import RegionEvaluator, search_regions
    from hybrid_remat.torch._regions import Region, RegionModel

    model, x = _stemmed()
    g = hrt.trace(model, x, hrt.default_loss, repeats=1, timed_steps=0)
    rm = RegionModel(g)
    layers = [f"body.layers.{i}" for i in range(4)]
    probe = RegionEvaluator(_problem(g, 1, None), rm, hrt._overheads.Overheads())
    only_layers = probe([Region(p) for p in layers], "probe")
    with_stem = probe([Region(p) for p in layers + ["stem"]], "probe")
    assert with_stem.peak < only_layers.peak
    budget = with_stem.peak
    problem = _problem(g, budget, None)
    best, tried, ev = search_regions(problem, rm, hrt._overheads.Overheads(), t_end=float("inf"))
    assert best is not None and best.peak <= budget
    fills = [c for c in ev.seen.values() if c.family.endswith(":fill") and ev.fits(c)]
    assert fills and all({p for p in layers} <= {r.path for r in c.regions} for c in fills)
    # the plan that leaves the library passed the simulator under the budget and trains like plain
    tp = hrt.plan_graph(g, budget, mechanism="regions", time_limit=5)
    assert tp.predicted_peak_bytes <= budget and "stem" in {r.path for r in tp.regions}
    hrt.default_loss(model(x)).backward()
    ref = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    hrt.apply(model, tp, hrt.default_loss)(x)
    for a, b in zip(ref, (p.grad for p in model.parameters()), strict=True):
        assert torch.equal(a, b)


def _choice(tp):
    return (tp.mechanism, tp.family, tuple(r.path for r in tp.regions), tuple(tp.dropped.tolist()),
            tp.predicted_peak_bytes)


@pytest.mark.parametrize("budget", [0.7, 0.4])
def test_a_seed_makes_the_choice_deterministic(budget):
    """With ``seed=`` the plan does not depend on timings: FLOP op times,
    fixed runtime costs, verification choosing by prediction among the
    candidates whose measured (deterministic) live peak fits; the caller's
    RNG is left as it was."""
    from test_torch_frontend import _gpt

    model, x, loss_fn = _gpt()
    torch.manual_seed(123)
    expect = torch.rand(3)
    torch.manual_seed(123)
    got = [hrt.plan(model, x, loss_fn, budget=budget, time_limit=5, seed=0, verify_steps=2) for _ in range(2)]
    assert torch.equal(torch.rand(3), expect)  # the caller's RNG state is restored
    assert _choice(got[0]) == _choice(got[1])
    for tp in got:
        assert tp.overheads.source == "fixed" and tp.graph.meta["torch"]["costs"] == "flops"
        assert tp.measured["live_peak_bytes"] <= tp.budget_bytes and tp.predicted_peak_bytes <= tp.budget_bytes
        assert "step_s" in tp.measured  # timed, recorded, not deciding
    from hybrid_remat.errors import HybridRematError

    with pytest.raises(HybridRematError, match="seed"):
        hrt.plan(model, x, loss_fn, budget=budget, seed="0")


# ------------------------------------------------------------ budgets as users write them (issue 22.4)
def _kap_graph():
    model, x = _stemmed()
    return model, x, hrt.trace(model, x, hrt.default_loss, repeats=1, timed_steps=0)


BUDGETS_OK = [  # spelling, bytes as a function of the traced keep-all peak k
    (0.5, lambda k: hrt.budget_bytes("50%", _G[0])), ("0.5", lambda k: hrt.budget_bytes("50%", _G[0])),
    (1, lambda k: k), (1.0, lambda k: k), ("1", lambda k: k), ("100%", lambda k: k), (0.25, lambda k: -(-k // 4)),
    (4096, lambda k: 4096), ("4096", lambda k: 4096), ("2KB", lambda k: 2000), ("1MiB", lambda k: 2**20),
    ("2GiB", lambda k: 2 * 2**30), ("1.5KiB", lambda k: 1536),
]
BUDGETS_BAD = [  # above 1 and not a size: an error, never a byte count
    (1.5, "ambiguous"), ("1.5", "ambiguous"), (2.0, "ambiguous"), (0, "positive"), ("0%", "positive"),
    (-1, "positive"), ("abc", "cannot be read"), (True, "not a budget"), ("12XB", "unknown unit"),
]
_G: list = []


@pytest.mark.parametrize("spec, want", BUDGETS_OK)
def test_torch_budgets_read_fractions_percentages_and_sizes(spec, want):
    if not _G:
        _G.append(_kap_graph()[2])
    g = _G[0]
    k = hrt.TorchPlan.keep_all_peak_bytes.fget(type("T", (), {"graph": g})())
    got = hrt.budget_bytes(spec, g)
    assert got == want(k)
    half = hrt.budget_bytes(0.5, g)
    assert half == hrt.budget_bytes("50%", g) and abs(half - k / 2) <= 1


@pytest.mark.parametrize("spec, why", BUDGETS_BAD)
def test_torch_budgets_above_one_that_are_not_sizes_are_errors(spec, why):
    from hybrid_remat.errors import BudgetError

    model, x = _stemmed()
    with pytest.raises(BudgetError, match=why):
        hrt.plan(model, x, hrt.default_loss, budget=spec, time_limit=1, repeats=1, calibrate=False, verify=False,
                 graph=_G[0] if _G else None)


# ------------------------------------------------------------ split regions, stable hints (issue 22.1, 22.4)
class Block(nn.Module):
    """A transformer-like block: a normalised mixing part and an MLP part, each a child module."""

    def __init__(self, d):
        super().__init__()
        self.norm1, self.mix, self.norm2, self.mlp = nn.LayerNorm(d), Layer(d), nn.LayerNorm(d), Layer(d)

    def forward(self, x):
        return self.mlp(self.norm2(self.mix(self.norm1(x))))


class Blocks(nn.Module):
    def __init__(self, d=32, n=4):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d) for _ in range(n))
        self.head = nn.Linear(d, 1)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def _blocks():
    torch.manual_seed(0)
    model, x = Blocks(), torch.randn(64, 32)
    return model, x, hrt.trace(model, x, hrt.default_loss, repeats=1, timed_steps=0, costs="flops")


def test_split_replaces_a_block_by_its_children_only_when_it_fits_and_pays():
    """From every block checkpointed, at its own peak: the split move returns
    a plan that fits, runs faster (simulated) than every block checkpointed
    when some plan one split away fits and is faster, and is at least as fast
    as the best of those (a block replaced by all, one or all but one of its
    children), found by enumeration; the plan of the search trains like
    plain."""
    from hybrid_remat.torch._planner import _problem
    from hybrid_remat.torch._region_search import RegionEvaluator, _split
    from hybrid_remat.torch._regions import Region, RegionModel

    model, x, g = _blocks()
    rm = RegionModel(g)
    oh = hrt._overheads.Overheads()
    blocks = [f"blocks.{i}" for i in range(4)]
    kids = ["norm1", "mix", "norm2", "mlp"]
    budget = RegionEvaluator(_problem(g, 1, None), rm, oh)([Region(p) for p in blocks], "probe").peak
    ev = RegionEvaluator(_problem(g, budget, None), rm, oh)
    whole = ev([Region(p) for p in blocks], "regions:depth2:all")
    one_away = []
    for b in blocks:
        rest = [Region(p) for p in blocks if p != b]
        for sub in [kids] + [[k] for k in kids] + [[k for k in kids if k != o] for o in kids]:
            one_away.append(ev(rest + [Region(f"{b}.{k}") for k in sub], "enum"))
    faster = [c for c in one_away if ev.fits(c) and c.step_s < whole.step_s]
    assert faster  # the instance exercises the move: the last block's norms need no checkpoint
    got = _split(ev, rm, whole, "regions:depth2", float("inf"), set(rm.valid_paths()))
    assert ev.fits(got) and set(got.regions) != set(whole.regions)
    assert got.step_s <= min(c.step_s for c in faster) + 1e-12
    rm.check(got.regions)  # disjoint, checkpointable
    # a planned step under that budget gives plain's gradients
    tp = hrt.plan_graph(g, budget, mechanism="regions", time_limit=5)
    assert tp.predicted_peak_bytes <= budget
    hrt.default_loss(model(x)).backward()
    ref = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    hrt.apply(model, tp, hrt.default_loss)(x)
    for a, b in zip(ref, (p.grad for p in model.parameters()), strict=True):
        assert torch.equal(a, b)


def test_a_refusal_names_the_same_budget_whatever_the_search_time():
    """A budget below every plan: the BudgetError's hint (the lowest peak of
    the plans every search evaluates, each pool checkpointed whole among
    them) is the same after no search time as after a long search, and that
    budget plans."""
    from hybrid_remat.errors import BudgetError

    _, _, g = _blocks()
    hints = []
    for limit in (0.0, 5.0, 0.0):
        with pytest.raises(BudgetError, match="budget=") as e:
            hrt.plan_graph(g, 1000, time_limit=limit, mechanism="regions")
        hints.append(int(str(e.value).rsplit("budget=", 1)[1].split()[0]))
    assert len(set(hints)) == 1
    tp = hrt.plan_graph(g, hints[0], time_limit=0.0, mechanism="regions")
    assert tp.predicted_peak_bytes <= hints[0]


class _Cand:
    def __init__(self, name, predicted_peak, measured_peak, ratio, predicted_s):
        self.family, self.predicted_peak_bytes, self.predicted_step_s = name, predicted_peak, predicted_s
        self.peak_as_run, self.ratio_as_run = measured_peak, ratio
        self.alternatives, self.measured, self.graph = [], None, None


def _fake_verify(monkeypatch, tighter):
    import hybrid_remat.torch._verify as v

    def measure(model, inputs, kwargs, loss_fn, device, plans, steps):
        return [{"live_peak_bytes": c.peak_as_run, "ratio": c.ratio_as_run, "step_s": c.ratio_as_run, "spread": 0.0}
                for c in plans]

    calls = []

    def plan_graph(graph, target, **kw):
        calls.append(target)
        if tighter is None:
            raise v.BudgetError("none")
        return tighter

    monkeypatch.setattr(v, "measure_candidates", measure)
    monkeypatch.setattr(v, "plan_graph", plan_graph)
    monkeypatch.setattr(v, "_at_budget", lambda tp, nbytes: tp)
    return v, calls


@pytest.mark.parametrize("tighter_fits", [True, False])
def test_verification_searches_tighter_before_settling_for_a_slower_plan(monkeypatch, tighter_fits):
    """The predicted-fastest plan holds more than simulated, over the budget,
    while a slower one fits: verification searches once more under the
    tightened budget and keeps the faster plan that fits (the one found
    there); when that search finds nothing, the slower plan that fitted."""
    a = _Cand("fast-over", 900, 1100, 1.2, 1.2)
    b = _Cand("slow-fits", 500, 600, 2.0, 2.0)
    a.alternatives = [b]
    c = _Cand("tighter", 800, 950, 1.4, 1.4)
    v, calls = _fake_verify(monkeypatch, c if tighter_fits else None)
    got = v._verified(nn.Linear(2, 2), (torch.zeros(1, 2),), {}, None, torch.device("cpu"), a, 1000, 1.0, False,
                      "auto", None, 3)
    assert calls and calls[0] < 1000  # searched again, tighter
    assert got is (c if tighter_fits else b)
    assert got.measured["live_peak_bytes"] <= 1000
