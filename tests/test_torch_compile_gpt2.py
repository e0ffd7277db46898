"""HF GPT-2 with ``labels=`` (two compiled graphs: the loss after a graph
break; dropout in every block) under ``CompilePartitioner`` at 0.7, 0.5 and
0.3: compiles, the measured allocator peak stays under the peak the compile
promises, gradients equal eager's (dropout recomputed from its saved mask)."""

from __future__ import annotations

import copy
import operator
import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import hybrid_remat.torch as hrt  # noqa: E402
from hybrid_remat.torch._rng_masks import recompute_dropout_from_masks  # noqa: E402

pytestmark = pytest.mark.torch
torch.set_num_threads(1)


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=2, n_positions=32, vocab_size=128))
    return model.train(), torch.randint(0, 128, (4, 32))


@pytest.fixture(scope="module")
def gpt2_eager():
    model, ids = _gpt2()
    ref = copy.deepcopy(model)
    torch.manual_seed(1)
    ref(ids, labels=ids).loss.backward()
    return model, ids, ref


@pytest.mark.parametrize("fraction", [0.7, 0.5, 0.3])
def test_gpt2_labels_compiles_within_its_promised_peak(gpt2_eager, fraction):
    base, ids, ref = gpt2_eager
    if fraction == 0.3:  # below this 2-layer GPT-2's floor in PT2's partition class (each recomputed value runs once
        # in the backward, live from its first to its last reader): one MLP's GELU-tanh values alone are 5 x 131072 B =
        # 30.0% of the 2183424 B keep-all activations; the lowest found is 42.9%. The 4-layer model below reaches 0.3.
        # Here the error names a budget that plans, and it does
        with pytest.raises(Exception, match=r"budget=0\.\d+ plans") as info:
            _compile_and_check(base, ids, ref, hrt.CompilePartitioner(fraction, time_limit=3))
        fraction = float(str(info.value).split("budget=")[1].split()[0])
        # the first hint knows the graphs compiled so far; a program's later graph (the loss after a graph
        # break) can raise it once, on the second pass, naming the budget with room for that graph
        try:
            _compile_and_check(base, ids, ref, hrt.CompilePartitioner(fraction, time_limit=3))
            return
        except Exception as err:  # noqa: BLE001 - the second pass's BudgetError, wrapped by dynamo
            assert "budget=" in str(err), str(err)
            hint = float(str(err).split("budget=")[1].split()[0])
            assert hint > fraction, str(err)
            fraction = hint
    _compile_and_check(base, ids, ref, hrt.CompilePartitioner(fraction, time_limit=3))


def test_gpt2_4_layers_labels_compiles_at_30_percent():
    """The issue's layer count (4 blocks, each ~1/4 of the activations): 0.3 compiles as asked, no hint followed."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    base = GPT2LMHeadModel(GPT2Config(n_layer=4, n_embd=64, n_head=2, n_positions=32, vocab_size=128)).train()
    ids = torch.randint(0, 128, (4, 32))
    ref = copy.deepcopy(base)
    torch.manual_seed(1)
    ref(ids, labels=ids).loss.backward()
    part = hrt.CompilePartitioner(0.3, time_limit=4)
    _compile_and_check(base, ids, ref, part)
    main = part.reports[-2]
    assert main["fits"] and main["predicted_peak_bytes"] <= main["budget_bytes"]
    assert main["predicted_peak_bytes"] < main["pt2_default_peak_bytes"]


def _compile_and_check(base, ids, ref, part):
    model = copy.deepcopy(base)
    torch._dynamo.reset()
    try:
        step = torch.compile(model, backend=part.backend("aot_eager"))

        def run():
            torch.manual_seed(1)
            step(ids, labels=ids).loss.backward()

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            run()
            if part.overshoot:  # the loss graph needed room the body took: compile again, leaving it
                torch._dynamo.reset()
                part.reset()
                model.zero_grad(set_to_none=True)
                step = torch.compile(model, backend=part.backend("aot_eager"))
                run()
        assert len(part.program.graphs) == 2
        assert all(r["n_random_saved"] >= 1 for r in part.reports[-2:-1])  # the body's dropouts: masks saved
        for (name, a), b in zip(ref.named_parameters(), model.parameters(), strict=True):
            assert torch.allclose(a.grad, b.grad, rtol=1e-4, atol=1e-6), name
        model.zero_grad(set_to_none=False)
        measured = hrt.allocator_peak(run, torch.device("cpu"))["live_peak_bytes"]
        assert 0 < measured <= part.promised_peak
    finally:
        torch._dynamo.reset()


def test_dropout_rewrite_is_bit_identical_and_leaves_eval_dropout_alone():
    aten = torch.ops.aten

    def f(x):
        out, mask = aten.native_dropout.default(x, 0.3, True)
        ev, _ = aten.native_dropout.default(x, 0.3, False)
        return out.sin() + ev, mask

    gm = torch.fx.symbolic_trace(f)
    x = torch.randn(64, 33)
    for n in gm.graph.nodes:  # fake values, as AOTAutograd's joint graph carries
        if n.op == "placeholder":
            n.meta["val"] = x
        elif n.target is aten.native_dropout.default:
            n.meta["val"] = aten.native_dropout.default(x, 0.3, n.args[2])
    torch.manual_seed(3)
    want = gm(x)
    assert recompute_dropout_from_masks(gm.graph) == 1  # the eval-mode one stays as it was
    gm.recompile()
    torch.manual_seed(3)
    got = gm(x)
    assert torch.equal(want[0], got[0]) and torch.equal(want[1], got[1])
    drop = [n for n in gm.graph.nodes if n.target is aten.native_dropout.default and n.args[2]][0]
    assert [u.args[1] for u in drop.users if u.target is operator.getitem] == [1]  # only the mask is read
