"""PyTorch frontend on models nobody on the project wrote: checkpoint
replays that must perform the ops their forward did (a forward that reads
state it changed, as Hugging Face's key/value cache does), tiny
``transformers`` models with random weights (no download)."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import hybrid_remat.torch as hrt  # noqa: E402
from hybrid_remat.errors import HybridRematError  # noqa: E402
from hybrid_remat.torch._regions import Region, RegionModel  # noqa: E402

pytestmark = pytest.mark.torch
torch.set_num_threads(1)


def _transformers():
    """``transformers``, importable beside a torchvision built for another torch
    (it imports torchvision when present)."""
    try:
        import torchvision  # noqa: F401
    except (ImportError, RuntimeError):
        try:
            from benchmarks.torch_models import import_torchvision

            import_torchvision()
        except ImportError:
            pass
    return pytest.importorskip("transformers")


class Memo:
    """A cache object the forward appends to (like a key/value cache)."""

    def __init__(self):
        self.items = []


class Appends(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(d, d)

    def forward(self, x, memo):  # reads what its own forward appended when replayed
        h = self.lin(x)
        scale = 1.0 + len(memo.items)
        memo.items.append(h.detach())
        return torch.tanh(h * scale)


class StatefulNet(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.a, self.b = nn.Linear(d, d), Appends(d)
        self.c = nn.Linear(d, d)

    def forward(self, x):
        return self.c(torch.relu(self.b(torch.relu(self.a(x)), Memo())))


def _grads(model):
    return [p.grad.clone() for p in model.parameters()]


def test_a_module_whose_forward_reads_state_it_changed_is_never_checkpointed():
    torch.manual_seed(0)
    model, x = StatefulNet(), torch.randn(8, 16)

    def loss_fn(out):
        return out.square().mean()

    g = hrt.trace(model, x, loss_fn, repeats=0, timed_steps=0)
    bad = g.meta["torch"]["replay_mismatch"]
    assert "b" in bad and "replay differs" in bad["b"], bad
    assert "a" not in bad and "c" not in bad and "b.lin" not in bad
    rm = RegionModel(g)
    assert "b" not in rm.valid_paths() and "a" in rm.valid_paths()
    # what the probe protects from: checkpointing "b" silently trains on other gradients
    ref = copy.deepcopy(model)
    loss_fn(ref(x)).backward()
    tp = hrt.plan_graph(g, 1.0, time_limit=1)
    tp.mechanism, tp.regions = "regions", (Region("b"),)
    hrt.apply(model, tp, loss_fn)(x)
    assert not all(torch.allclose(a, b) for a, b in zip(_grads(ref), _grads(model), strict=True))
    with pytest.raises(HybridRematError, match="replay differs"):
        rm.plan([Region("b")], "cpu")


def _gpt2(layers=2, d=64, T=32, vocab=128):
    tf = _transformers()
    torch.manual_seed(0)
    cfg = tf.GPT2Config(n_layer=layers, n_embd=d, n_head=4, n_positions=T, vocab_size=vocab)
    model = tf.GPT2LMHeadModel(cfg)
    ids = torch.randint(0, vocab, (2, T))
    return model, ids


def test_gpt2_regions_with_selective_saves_replay_and_train_like_plain():
    """The issue's crash: transformers' GPT-2 passes its key/value cache to
    every block; a checkpointed block (or attention) replayed with a
    selective context appended to it again and failed in backward
    (``aten.slice.Tensor encountered during backward but not found in
    storage``).  Now the cache is off inside checkpointed calls (as
    transformers' own checkpointing does) and every region trains like the
    plain step."""
    model, ids = _gpt2()

    def loss_fn(out):
        return out.loss

    g = hrt.trace(model, (ids,), loss_fn, example_kwargs={"labels": ids}, repeats=0, timed_steps=0)
    assert g.meta["torch"]["replay_mismatch"] == {}
    rm = RegionModel(g)
    tp = hrt.plan_graph(g, 0.9, mechanism="regions", time_limit=1)
    ref = copy.deepcopy(model)
    torch.manual_seed(5)
    ref(ids, labels=ids).loss.backward()
    want = _grads(ref)
    for path in ("transformer.h.0", "transformer.h.1.attn", "transformer"):
        tp.regions = (Region(path, rm.saveable_ops(path)),)
        assert tp.regions[0].save_ops  # a selective region: the case that crashed
        model.zero_grad(set_to_none=True)
        torch.manual_seed(5)  # dropout: the same masks as the reference, replayed in backward
        hrt.apply(model, tp, loss_fn)(ids, labels=ids)
        for a, b in zip(want, _grads(model), strict=True):
            assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), path


def test_gpt2_issue_reproduction_plans_and_steps():
    """``plan(budget="30%", labels=...)`` then the step, as in the issue (its config)."""
    model, ids = _gpt2(layers=4, d=128, T=64, vocab=512)
    tp = hrt.plan(model, (ids,), lambda o: o.loss, budget="30%", example_kwargs={"labels": ids}, time_limit=2,
                  repeats=1, verify_steps=1)
    step = hrt.apply(model, tp)
    for _ in range(2):
        loss = step(ids, labels=ids)
        assert torch.isfinite(loss)
