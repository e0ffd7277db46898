"""PyTorch frontend on models nobody on the project wrote: ours against each
model's own checkpointing, at its memory.

Models (small configs, random weights, no download): transformers
``GPT2LMHeadModel``, ``LlamaForCausalLM``, ``BertForMaskedLM``,
``T5EncoderModel`` (4 layers, d=128, 64 tokens, batch 2), timm
``vit_tiny_patch16_224`` (64x64 images, batch 4) and ``convnext_atto``
(64x64, batch 4).  Methods: plain training; the model's native
checkpointing (``activation_checkpointing_enable()`` for transformers,
``set_grad_checkpointing(True)`` for timm); ours (``hrt.plan`` +
``hrt.apply``) at 70/50/30 % of the traced keep-all peak and at the native
checkpointing's live peak ("= native", to the byte).

Columns: live peak (``hrt.LiveBytes``: storages ATen calls allocate, alive
at once; parameter gradients left out: what the budget counts); ok = live
peak within the row's budget; time = median step over the median plain
step, interleaved (``--rounds`` pairs), with the spread (the
interquartile range of the per-round ratios); / native = median of the
per-round ratios ours over the native checkpointing's step, timed in the
same rounds (plain, native, ours in turn), with their IQR; predicted = our plan's
predicted ratio (op times + the runtime's measured own cost); mechanism.
``--plans N``: each row's plan is followed by N-1 more plans of the same
budget (traced graph and calibration reused, ``--loop-time-limit``
search, no verification), every candidate of each stepped twice: the
crash check (column loop: crashes / plans, distinct choices).

Usage::

    python -m benchmarks.torch_zoo                       # all models, ~15 min on 2 busy cores
    python -m benchmarks.torch_zoo --models gpt2 bert --budgets 50

Needs ``transformers`` and ``timm`` (rows of a missing package are skipped).
Writes ``benchmarks/results/torch_zoo.md`` and ``.json`` (``--out`` or ``$OUT``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import traceback

import torch

import hybrid_remat.torch as hrt
from benchmarks._common import RESULTS
from benchmarks.torch_models import import_torchvision
from hybrid_remat.errors import BudgetError

MODELS = ("gpt2", "llama", "bert", "t5_encoder", "vit_tiny", "convnext_atto")


class Case:
    def __init__(self, name, model, inputs, kwargs, loss_fn, native_on, native_off):
        self.name, self.model, self.inputs, self.kwargs, self.loss_fn = name, model, inputs, kwargs, loss_fn
        self.native_on, self.native_off = native_on, native_off


def make_case(name: str, device) -> Case:
    import_torchvision()  # transformers and timm import torchvision when present
    torch.manual_seed(0)
    if name in ("gpt2", "llama", "bert", "t5_encoder"):
        import transformers as tf

        ids = torch.randint(0, 512, (2, 64), device=device)
        if name == "gpt2":
            model = tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=4, n_embd=128, n_head=4, n_positions=64, vocab_size=512))
        elif name == "llama":
            model = tf.LlamaForCausalLM(tf.LlamaConfig(num_hidden_layers=4, hidden_size=128, num_attention_heads=4,
                                                       num_key_value_heads=2, intermediate_size=344, vocab_size=512,
                                                       max_position_embeddings=64))
        elif name == "bert":
            model = tf.BertForMaskedLM(tf.BertConfig(num_hidden_layers=4, hidden_size=128, num_attention_heads=4,
                                                     intermediate_size=512, vocab_size=512, max_position_embeddings=64))
        else:
            model = tf.T5EncoderModel(tf.T5Config(num_layers=4, d_model=128, num_heads=4, d_kv=32, d_ff=512,
                                                  vocab_size=512))
        model = model.to(device).train()
        if name == "t5_encoder":
            kwargs = {}

            def loss_fn(out):
                return out.last_hidden_state.square().mean()
        else:
            kwargs = {"labels": ids}

            def loss_fn(out):
                return out.loss

        def on():
            model.activation_checkpointing_enable() if hasattr(model, "activation_checkpointing_enable") \
                else model.gradient_checkpointing_enable({"use_reentrant": False})

        def off():
            model.activation_checkpointing_disable() if hasattr(model, "activation_checkpointing_disable") \
                else model.gradient_checkpointing_disable()

        return Case(name, model, (ids,), kwargs, loss_fn, on, off)
    import timm

    timm_name = {"vit_tiny": "vit_tiny_patch16_224", "convnext_atto": "convnext_atto"}[name]
    extra = {"img_size": 64} if name == "vit_tiny" else {}
    model = timm.create_model(timm_name, pretrained=False, num_classes=10, **extra).to(device).train()
    x = torch.randn(4, 3, 64, 64, device=device)
    y = torch.randint(0, 10, (4,), device=device)

    def loss_fn(out):
        return torch.nn.functional.cross_entropy(out, y)

    return Case(name, model, (x,), {}, loss_fn, lambda: model.set_grad_checkpointing(True),
                lambda: model.set_grad_checkpointing(False))


def _live_peak(case, step=None) -> int:
    m = case.model
    for p in m.parameters():
        p.grad = None
    meter = hrt.LiveBytes()
    with meter:
        if step is None:
            case.loss_fn(m(*case.inputs, **case.kwargs)).backward()
        else:
            step(*case.inputs, **case.kwargs)
    keys = [hrt._common.storage_key(p.grad) for p in m.parameters() if p.grad is not None]
    return int(meter.peak(keys))


def _timed(fn) -> float:
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    if cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def _median_iqr(ratios) -> tuple[float, float]:
    q = statistics.quantiles(ratios, n=4) if len(ratios) >= 4 else [min(ratios), 0, max(ratios)]
    return statistics.median(ratios), q[2] - q[0]


def _ratio(case, run, rounds: int, native=None) -> tuple:
    """Median of per-round ratios (method over plain, interleaved) and their
    IQR; with ``native``, each round also times the native checkpointing's
    step (plain, native, method in turn): also the median of the per-round
    ratios method over native and their IQR (a load spike hits all three)."""
    def plain():
        case.model.zero_grad(set_to_none=False)
        case.loss_fn(case.model(*case.inputs, **case.kwargs)).backward()

    run(), plain()  # warm-up
    if native is not None:
        native()
    ratios, vs_native = [], []
    for _ in range(rounds):
        tp = _timed(plain)
        tn = _timed(native) if native is not None else None
        tm = _timed(run)
        ratios.append(tm / tp)
        if tn is not None:
            vs_native.append(tm / tn)
    if native is None:
        return _median_iqr(ratios)
    return (*_median_iqr(ratios), *_median_iqr(vs_native))


def run_case(name, args, device, log) -> list[dict]:
    case = make_case(name, device)
    rows = []
    case.native_on()
    try:
        native_peak = _live_peak(case)
    finally:
        case.native_off()

    def native():  # switched on for its own step only: the plain step it is timed against runs without it
        case.native_on()
        try:
            case.model.zero_grad(set_to_none=False)
            case.loss_fn(case.model(*case.inputs, **case.kwargs)).backward()
        finally:
            case.native_off()

    native_ratio, native_iqr = _ratio(case, native, args.rounds)
    plain_peak = _live_peak(case)
    rows.append({"model": name, "method": "plain", "live_peak_bytes": plain_peak, "time_ratio": 1.0})
    rows.append({"model": name, "method": "native checkpointing", "live_peak_bytes": native_peak,
                 "time_ratio": native_ratio, "iqr": native_iqr})
    log(f"{name}: plain {plain_peak} B, native {native_peak} B x{native_ratio:.2f}")
    budgets = [(f"{b}%", f"{b}%") for b in args.budgets] + [("= native", native_peak)]
    for label, budget in budgets:
        row = {"model": name, "method": f"ours {label}", "budget": budget}
        try:
            tp = hrt.plan(case.model, case.inputs, case.loss_fn, budget=budget, example_kwargs=case.kwargs,
                          time_limit=args.time_limit)
            step = hrt.apply(case.model, tp)
            step(*case.inputs, **case.kwargs)
            if args.plans > 1:
                row["loop"] = _crash_loop(case, tp, budget, args)
                log(f"{name} {label}: {row['loop']}")
            peak = _live_peak(case, step)

            def ours(step=step):
                case.model.zero_grad(set_to_none=False)
                step(*case.inputs, **case.kwargs)

            ratio, iqr, vs_native, vs_native_iqr = _ratio(case, ours, args.rounds, native)
            row.update(budget_bytes=tp.budget_bytes, live_peak_bytes=peak, ok=peak <= tp.budget_bytes,
                       time_ratio=ratio, iqr=iqr, vs_native=vs_native, vs_native_iqr=vs_native_iqr,
                       predicted_ratio=1 + tp.overhead_pct / 100.0,
                       mechanism=tp.mechanism, family=tp.family, n_regions=len(tp.regions))
            log(f"{name} {label}: {peak} B (budget {tp.budget_bytes}) x{ratio:.2f} (pred x{row['predicted_ratio']:.2f}, "
                f"/native x{vs_native:.2f}) "
                f"{tp.mechanism} {tp.family}")
        except BudgetError as e:
            row.update(refused=str(e)[-160:])
            log(f"{name} {label}: refused: {str(e)[-160:]}")
        except Exception as e:  # noqa: BLE001 - a crash is a result of this benchmark
            row.update(error=f"{type(e).__name__}: {e}"[:300])
            log(f"{name} {label}: ERROR {type(e).__name__}: {e}")
            traceback.print_exc()
        rows.append(row)
    return rows


def _crash_loop(case, tp, budget, args) -> dict:
    """Plan and step ``args.plans - 1`` more times (the traced graph and the
    calibration of the row's plan reused, a short search, no timing): every
    candidate of each plan (the chosen one and the alternatives verification
    would measure) steps twice.  Counts crashes, refusals (a ``BudgetError``
    of the short search: no plan found under the budget) and distinct
    choices."""
    crashes, choices, steps, refused = [], set(), 0, 0
    for _ in range(args.plans - 1):
        try:
            p = hrt.plan(case.model, case.inputs, case.loss_fn, budget=budget, example_kwargs=case.kwargs,
                         time_limit=args.loop_time_limit, graph=tp.graph, calibrate=tp.overheads, verify=False)
            choices.add((p.mechanism, p.family, tuple(r.path for r in p.regions)))
            for c in [p, *p.alternatives]:
                s = hrt.apply(case.model, c, case.loss_fn)
                for _ in range(2):
                    s(*case.inputs, **case.kwargs)
                    steps += 1
        except BudgetError:  # the short search found no plan under the budget: refused, not a crash
            refused += 1
        except Exception as e:  # noqa: BLE001 - a crash is what this loop counts
            crashes.append(f"{type(e).__name__}: {e}"[:200])
    return {"plans": args.plans, "steps": steps + 1, "crashes": len(crashes), "errors": crashes[:3],
            "refused": refused, "choices": len(choices)}


def _mb(x):
    return f"{x / 1e6:.2f}" if isinstance(x, (int, float)) else "-"


def _loop(r) -> str:
    lp = r.get("loop")
    if not lp:
        return "-"
    refused = f", {lp['refused']} refused" if lp.get("refused") else ""
    return f"{lp['crashes']}/{lp['plans']} crashed{refused}, {lp['choices']} choice(s)"


def to_markdown(rows, meta) -> str:
    out = [f"# torch_zoo ({meta['date']}, {meta['machine']}, torch {meta['torch']}, transformers "
           f"{meta.get('transformers')}, timm {meta.get('timm')}; {meta['seconds']:.0f} s)", "",
           meta["note"], "",
           "| model | method | budget MB | live peak MB | ok | time | IQR | / native (IQR) | predicted | mechanism | loop |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("carried_from"):
            r = {**r, "method": f"{r['method']} (run of {r['carried_from']})"}
        if "refused" in r or "error" in r:
            why = (r.get("refused") or r.get("error"))[-90:].replace("|", "/")
            out.append(f"| {r['model']} | {r['method']} | - | - | - | {'refused' if 'refused' in r else 'ERROR'} | - | - | - "
                       f"| {why} | {_loop(r)} |")
            continue
        iqr = f"{r['iqr']:.2f}" if "iqr" in r else "-"
        pred = f"x{r['predicted_ratio']:.2f}" if "predicted_ratio" in r else "-"
        mech = f"{r['mechanism']} {r['family'][:40]}" if "mechanism" in r else "-"
        vs = f"x{r['vs_native']:.2f} ({r['vs_native_iqr']:.2f})" if "vs_native" in r else "-"
        out.append(f"| {r['model']} | {r['method']} | {_mb(r.get('budget_bytes'))} | {_mb(r['live_peak_bytes'])} | "
                   f"{'yes' if r.get('ok', True) else 'NO'} | x{r['time_ratio']:.2f} | {iqr} | {vs} | {pred} | {mech} | "
                   f"{_loop(r)} |")
    errs = [abs(r["predicted_ratio"] - r["time_ratio"]) / r["time_ratio"] for r in rows
            if "predicted_ratio" in r and not r.get("carried_from")]
    if errs:
        out += ["", f"Predicted vs measured step-time ratio over {len(errs)} rows of ours (this run): mean error "
                f"{100 * statistics.mean(errs):.1f} %, at most {100 * max(errs):.1f} %."]
    loops = [r["loop"] for r in rows if r.get("loop") and not r.get("carried_from")]
    if loops:
        out += ["", f"Crash loop: {sum(lp['plans'] for lp in loops)} plans, {sum(lp['steps'] for lp in loops)} steps "
                f"over {len(loops)} rows, {sum(lp['crashes'] for lp in loops)} crashes."]
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="*", default=list(MODELS), choices=MODELS)
    ap.add_argument("--budgets", nargs="*", type=int, default=[70, 50, 30])
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--plans", type=int, default=1)
    ap.add_argument("--time-limit", type=float, default=5.0)
    ap.add_argument("--loop-time-limit", type=float, default=0.5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=os.environ.get("OUT") or str(RESULTS))
    ap.add_argument("--carry", default=None, help="an earlier torch_zoo.json: rows of models skipped here (their "
                    "package is not installed) are copied from it, marked with that run's date")
    ap.add_argument("--note", default="CPU shared with other jobs (2 cores, 7 sessions): timings move by 10-20 % "
                                      "between runs.")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    t0 = time.perf_counter()
    rows = []

    def log(msg):
        print(f"[{time.perf_counter() - t0:6.0f}s] {msg}", flush=True)

    skipped = []
    for name in args.models:
        try:
            rows += run_case(name, args, device, log)
        except ImportError as e:
            log(f"{name}: skipped ({e})")
            skipped.append(name)
    if skipped and args.carry:  # rows of a package missing here, from an earlier run, marked as such
        try:
            with open(args.carry) as f:
                old = json.load(f)
        except (OSError, ValueError):
            old = {"rows": []}
        when = old.get("meta", {}).get("date", "?")
        for r in old["rows"]:  # a row carried there keeps the date of the run that measured it
            if r["model"] in skipped:
                rows.append({**r, "carried_from": r.get("carried_from") or when})
    meta = {"date": time.strftime("%Y-%m-%d"), "machine": platform.machine() + " " + args.device,
            "torch": torch.__version__, "seconds": time.perf_counter() - t0, "note": args.note,
            "rounds": args.rounds, "plans": args.plans}
    for pkg in ("transformers", "timm"):
        try:
            meta[pkg] = __import__(pkg).__version__
        except ImportError:
            meta[pkg] = None
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, "torch_zoo" + ("" if args.models == list(MODELS) else "_" + "_".join(args.models)))
    with open(stem + ".json", "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    with open(stem + ".md", "w") as f:
        f.write(to_markdown(rows, meta))
    print(to_markdown(rows, meta))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
