"""Validate the roofline cost model (plugin ``hybrid-remat-roofline``)
against the measured operator times of the profiled graphs in ``datasets/``.

For each graph and node: relative error ``|est - measured| / measured`` of
the GPU times against the ``h200`` table (spec-sheet constants) and the
``h200_fit`` table, and of the CPU times against the ``xeon16`` table
(``h200_fit`` and ``xeon16`` fitted with ``--fit`` on the FIT_GRAPHS; the
held-out graphs are reported separately).  CPU times
the loader filled in (no CPU counterpart) are left out.  Also the error of
the whole step (sum over nodes).

Writes ``benchmarks/results/roofline_validation.{md,json}``.

Usage::

    python -m benchmarks.roofline_validation            # validate (~5 s)
    python -m benchmarks.roofline_validation --fit      # refit xeon16 and print the constants
    python -m benchmarks.roofline_validation --quick    # two graphs only
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks._common import profiled_graphs, require_plugin, write_results
from hybrid_remat.loaders import load_graph

_roofline = require_plugin("hybrid_remat_roofline", "hybrid-remat-roofline")
DEVICES, DeviceSpec, RooflineModel = _roofline.DEVICES, _roofline.DeviceSpec, _roofline.RooflineModel
bytes_moved, is_matrix_op = _roofline.model.bytes_moved, _roofline.model.is_matrix_op
FIT_GRAPHS = ("resnet18_b64", "mobilenet_v2_b32", "gpt2_small_b4_s512", "unet_b8", "mlp_chain_b256")
PAIRS = (("gpu", "h200"), ("gpu", "h200_fit"), ("cpu", "xeon16"))
FITTED = ("xeon16", "h200_fit")


def load_all(quick: bool):
    files = profiled_graphs()
    if quick:
        files = [f for f in files if f.name.startswith(("resnet18", "gpt2"))]
    return [load_graph(f) for f in files]


def rel_errors(model, g, kind, device):
    meas = np.asarray(g.costs[kind])
    keep = meas > 0
    if kind in g.estimated:
        keep &= ~np.asarray(g.estimated[kind])
    est = model.estimate(g, device)
    return np.abs(est[keep] - meas[keep]) / meas[keep], float(est.sum()), float(meas.sum())


def fit_device(graphs, kind: str, name: str) -> DeviceSpec:
    from scipy.optimize import minimize

    data = []
    for g in graphs:
        if g.name not in FIT_GRAPHS:
            continue
        meas = np.asarray(g.costs[kind])
        keep = (meas > 0) & ~np.asarray(g.estimated.get(kind, np.zeros(g.n, bool)))
        kinds = np.array([is_matrix_op(str(o)) != "" for o in g.meta["op"]])
        fl = np.nan_to_num(g.flops, nan=0.0)
        data.append((fl[keep], bytes_moved(g)[keep], kinds[keep], meas[keep]))
    fl, by, mat, meas = (np.concatenate(x) for x in zip(*data, strict=True))

    def spec(x):
        vec, mm, bw, oh = np.exp(x)
        return vec, mm, bw, oh

    def loss(x):
        vec, mm, bw, oh = spec(x)
        peak = np.where(mat, mm, vec)
        est = np.maximum(fl / peak, by / bw) + oh
        return float(np.mean(np.log(est / meas) ** 2))

    x0 = np.log([1e11, 1e12, 2e10, 2e-5])
    res = minimize(loss, x0, method="Nelder-Mead", options={"maxiter": 4000, "xatol": 1e-6, "fatol": 1e-10})
    vec, mm, bw, oh = spec(res.x)
    return DeviceSpec(name, float(f"{vec:.3g}"), float(f"{mm:.3g}"), float(f"{mm:.3g}"), float(f"{bw:.3g}"),
                      float(f"{oh:.3g}"), "fitted")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="two graphs only, results not written")
    ap.add_argument("--fit", action="store_true", help="refit the xeon16 constants and print them")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    graphs = load_all(args.quick)
    if args.fit:
        print(repr(fit_device(graphs, "cpu", "xeon16")))
        print(repr(fit_device(graphs, "gpu", "h200_fit")))
        return 0
    model = RooflineModel()
    rows, pooled = [], {}
    for kind, dev in PAIRS:
        for g in graphs:
            err, est_sum, meas_sum = rel_errors(model, g, kind, dev)
            split = ("fit" if g.name in FIT_GRAPHS else "held-out") if dev in FITTED else "spec"
            rows.append({"graph": g.name, "measured": kind, "device": dev, "split": split, "nodes": int(err.size),
                         "median_rel_err": float(np.median(err)), "p90_rel_err": float(np.quantile(err, 0.9)),
                         "step_rel_err": abs(est_sum - meas_sum) / meas_sum})
            pooled.setdefault((kind, dev, "all"), []).append(err)
            if split != "spec":
                pooled.setdefault((kind, dev, split), []).append(err)
    summary = []
    for (kind, dev, split), errs in pooled.items():
        e = np.concatenate(errs)
        summary.append({"measured": kind, "device": dev, "graphs": split, "nodes": int(e.size),
                        "median_rel_err": float(np.median(e)), "p90_rel_err": float(np.quantile(e, 0.9))})
    wall = time.perf_counter() - t0
    lines = [
        "# Roofline cost model vs measured operator times",
        "",
        "`t = max(flops / peak, (out + in bytes) / bandwidth) + overhead` (plugin `hybrid-remat-roofline`),",
        "per node, against the profiled graphs in `datasets/` (GPU: H200, CPU: 16-thread Xeon).",
        "Relative error `|est - measured| / measured`; CPU times the loader filled in are excluded.",
        "",
        "Constants: `h200` from the NVIDIA spec sheet (FP32 67 TFLOPS, TF32 tensor 494.5 TFLOPS dense for",
        "convolutions, 4.8 TB/s) with a 20 us per-op overhead read off the smallest measured ops (not a spec);",
        "`xeon16` and `h200_fit` fitted (vector and matrix FLOP/s, bandwidth, overhead: least squares in",
        f"log time) on {', '.join(FIT_GRAPHS)}; the other graphs are held out.",
        "",
        "| measured | device table | graphs | nodes | median rel. err | p90 rel. err |",
        "|---|---|---|---|---|---|",
    ]
    for s in summary:
        lines.append(f"| {s['measured']} | {s['device']} | {s['graphs']} | {s['nodes']} | "
                     f"{s['median_rel_err']:.1%} | {s['p90_rel_err']:.1%} |")
    lines += ["", "Per graph (step = error of the summed step time):", "",
              "| graph | device table | split | nodes | median | p90 | step |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['graph']} | {r['device']} | {r['split']} | {r['nodes']} | {r['median_rel_err']:.1%} | "
                     f"{r['p90_rel_err']:.1%} | {r['step_rel_err']:.1%} |")
    lines += [""]
    for name in ("h200", *FITTED):
        x = DEVICES[name]
        lines.append(f"- `{name}` ({x.source}): vector {x.vector_flops:.3g} FLOP/s, matmul {x.matmul_flops:.3g}, "
                     f"conv {x.conv_flops:.3g}, bandwidth {x.bandwidth:.3g} B/s, overhead {x.overhead:.3g} s.")
    lines += ["", f"Reproduce: `python -m benchmarks.roofline_validation` (wall {wall:.1f} s); "
              "refit: `--fit`."]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.quick:
        write_results("roofline_validation", markdown=text,
                      json_doc={"summary": summary, "per_graph": rows, "fit_graphs": list(FIT_GRAPHS)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
