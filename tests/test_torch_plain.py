"""PyTorch frontend: budgets at or above keep-all run the plain step, plan()
warns in eval mode, ``repr`` and ``summary()`` agree on what was dropped."""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import hybrid_remat.torch as hrt  # noqa: E402

pytestmark = pytest.mark.torch
torch.set_num_threads(1)


def _mlp():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 1))
    return model, torch.randn(32, 16)


@pytest.mark.parametrize("budget", [1.0, "1", "100%", "150%", "1GiB", 10**9])
def test_a_budget_at_or_above_keep_all_runs_the_plain_step(budget):
    model, x = _mlp()
    tp = hrt.plan(model, x, hrt.default_loss, budget=budget, time_limit=1, repeats=1)
    assert tp.mechanism == "regions" and tp.regions == () and tp.overhead_s == 0.0
    assert tp.predicted_peak_bytes == tp.keep_all_peak_bytes <= tp.budget_bytes
    assert "plain step" in repr(tp) and tp.overhead_pct == pytest.approx(0.0, abs=1e-9)
    step = hrt.apply(model, tp)
    assert step.runner is not None and step.runner.targets == []  # nothing patched: the plain step
    loss = step(x)
    assert torch.isfinite(loss)


def test_plan_warns_in_eval_mode():
    model, x = _mlp()
    model.eval()
    with pytest.warns(hrt.TorchPlanWarning, match="eval mode"):
        hrt.plan(model, x, hrt.default_loss, budget=1.0, time_limit=1, repeats=1)


@pytest.mark.parametrize("mechanism", ["ops", "regions"])
def test_repr_and_summary_agree_on_what_was_dropped(mechanism):
    from test_torch_frontend import _gpt

    model, x, loss_fn = _gpt()
    tp = hrt.plan(model, x, loss_fn, budget=0.7, mechanism=mechanism, time_limit=1, repeats=1,
                  calibrate=False, verify=False)
    n = int(re.search(r"(\d+) forward outputs dropped", repr(tp)).group(1))
    assert n == len(tp.summary()["dropped"]) == len(tp.dropped_saved) > 0


def test_a_budget_error_names_the_same_budget_on_a_rerun_and_it_plans():
    from hybrid_remat.errors import BudgetError

    model, x = _mlp()
    hints = []
    for _ in range(2):
        with pytest.raises(BudgetError, match="plans") as info:
            hrt.plan(model, x, hrt.default_loss, budget=0.05, time_limit=1, repeats=1)
        hints.append(int(re.search(r"budget=(\d+) plans", str(info.value)).group(1)))
    assert hints[0] == hints[1]
    tp = hrt.plan(model, x, hrt.default_loss, budget=hints[0], time_limit=1, repeats=1)
    assert tp.predicted_peak_bytes <= hints[0]


def test_verification_keeps_the_predicted_plan_within_the_measured_spread(monkeypatch):
    """The choice between candidates moves only when another is faster by
    more than the timing noise: the floor (5 % on a CPU) or the spread of
    the per-round ratios measured, whichever is larger."""
    import types

    from test_torch_frontend import _resnet

    from hybrid_remat.torch import _verify

    model, x, loss_fn = _resnet()
    g = hrt.trace(model, x, loss_fn, repeats=1, timed_steps=0)

    def fresh():
        return hrt.plan(model, x, loss_fn, budget=0.7, graph=g, mechanism="regions", time_limit=2,
                        calibrate=False, verify=False)

    first = fresh()
    assert first.alternatives
    for spread, moved in ((0.0, True), (0.12, False)):
        def measured(model, inputs, kwargs, loss_fn, device, plans, steps, spread=spread):
            return [{"live_peak_bytes": p.predicted_peak_bytes, "plain_step_s": 1.0, "step_s": 1.0,
                     "ratio": 1.3 if i == 0 else 1.2, "spread": spread} for i, p in enumerate(plans)]

        monkeypatch.setattr(_verify, "measure_candidates", measured)
        cand = fresh()
        got = _verify._verified(model, (x,), {}, loss_fn, types.SimpleNamespace(type="cpu"), cand,
                                cand.budget_bytes, 2, False, "regions", cand.overheads, 5)
        assert (got.family != cand.family) is moved, spread


def test_torch_plan_cli_plans_with_the_threads_it_says(tmp_path, capsys):
    """``torch-plan`` predicts the overhead of a step run with the same number
    of torch threads; it says how many (``--threads`` sets them)."""
    from test_torch_frontend import FACTORY, _cli_args

    from hybrid_remat.errors import HybridRematError

    mod = tmp_path / "factory_mod.py"
    mod.write_text(FACTORY)
    before = torch.get_num_threads()
    try:
        cli, args = _cli_args(f"{mod}:make", tmp_path / "plan.json", "--threads", "1")
        assert cli.run(args) == 0
        assert "with 1 torch thread(s)" in capsys.readouterr().out
        cli, args = _cli_args(f"{mod}:make", tmp_path / "plan2.json", "--threads", "0")
        with pytest.raises(HybridRematError, match="--threads"):
            cli.run(args)
    finally:
        torch.set_num_threads(before)
