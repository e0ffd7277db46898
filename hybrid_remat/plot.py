"""Pictures of plans and sweeps (matplotlib, extra ``[plot]``).

:func:`timeline` draws a plan's memory over its steps on each device, with
the budget, the peak, recomputations and copies; for makespan problems (or
``kind="gantt"``) a Gantt chart of the compute devices and copy streams sits
on top.  :func:`pareto` draws a sweep's budget vs TDI% per graph with the
gap to the lower bound as a band.  Both return a
:class:`matplotlib.figure.Figure` built without pyplot, so they run headless
and leave the user's backend alone; :func:`save` writes PNG, SVG or PDF by
extension.

Long plans are drawn as a min/max envelope of at most ``max_points``
buckets (the peak is kept exactly) and their marks are bucketed the same
way, so a 100k-step plan draws as fast and as legibly as a short one.

Examples
--------
>>> import hybrid_remat as hr
>>> g = hr.generators.chain(6, bytes=10)
>>> p = hr.Problem.single(g, "100%")
>>> fig = hr.plot.timeline(p, hr.keep_all_plan(g, "cost"))
>>> fig.axes[0].get_ylabel(), fig.axes[0].get_xlabel()
('cost memory (B)', 'plan step')
"""

from __future__ import annotations

import math
import os

import numpy as np

from .errors import HybridRematError, PlanError

__all__ = ["timeline", "pareto", "save", "step_times", "problem_for_plan", "plan_devices", "FORMATS"]

FORMATS = (".png", ".svg", ".pdf")
_COMPUTE, _RECOMPUTE, _COPY_IN, _COPY_OUT, _BUDGET = "#3b75af", "#e8871e", "#2ca02c", "#9467bd", "#d62728"


def _figure(width: float, height: float):
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise HybridRematError("plotting needs matplotlib: pip install 'hybrid_remat[plot]'") from None
    return Figure(figsize=(width, height), layout="constrained")


def save(fig, path: str | os.PathLike, *, overwrite: bool = False) -> None:
    """Write ``fig`` to ``path`` (``.png``, ``.svg`` or ``.pdf``).

    Raises
    ------
    FileExistsError
        ``path`` exists and ``overwrite`` is false.
    HybridRematError
        An unsupported extension.
    """
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext not in FORMATS:
        raise HybridRematError(f"{path}: cannot tell the format; use one of {', '.join(FORMATS)}")
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"{path} exists; pass overwrite=True (CLI: --force) to replace it")
    fig.savefig(path, dpi=150 if ext == ".png" else None)


def _unit(nbytes: float) -> tuple[float, str]:
    for scale, name in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if nbytes >= 2 * scale:
            return float(scale), name
    return 1.0, "B"


def _time_unit(seconds: float) -> tuple[float, str]:
    for scale, name in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if seconds >= 2 * scale:
            return scale, name
    return 1.0, "s"


def _envelope(y: np.ndarray, max_points: int):
    """``(x, low, high)``: ``y`` itself when short, else per-bucket min/max."""
    k = y.shape[0]
    if k <= max_points:
        x = np.arange(k, dtype=np.float64)
        return x, y, y
    edges = np.linspace(0, k, max_points + 1).astype(np.int64)
    edges = np.unique(edges)
    starts = edges[:-1]
    return (starts + edges[1:] - 1) / 2.0, np.minimum.reduceat(y, starts), np.maximum.reduceat(y, starts)


def _bucketed(steps: np.ndarray, k: int, max_points: int) -> np.ndarray:
    """Mark positions: the steps themselves, or one per occupied bucket."""
    if steps.size <= max_points // 4 or k <= max_points:
        return steps
    width = max(1, math.ceil(k / max_points))
    return np.unique(steps // width) * width + width // 2


def plan_devices(doc: dict, source: str = "the plan") -> list:
    """The devices a ``remat-plan/1`` document names, each checked: a name
    and ``memory_bytes`` a whole number from 1 B to 4 EiB.

    Raises
    ------
    PlanError
        No devices, or a malformed entry (``memory_bytes`` 1e30, a string).
    """
    from .budgets import MAX_BUDGET_BYTES
    from .problem import Device

    devs = doc.get("devices") if isinstance(doc, dict) else None
    if not devs or not isinstance(devs, list):
        raise PlanError(f"{source} names no devices: give --budget or --device")
    out = []
    for d in devs:
        size = d.get("memory_bytes") if isinstance(d, dict) else None
        ok = (isinstance(size, (int, float)) and not isinstance(size, bool) and math.isfinite(size)
              and size == int(size) and 1 <= size <= MAX_BUDGET_BYTES and isinstance(d.get("name"), str))
        if not ok:
            raise PlanError(f"{source}: malformed devices list (each needs a name and memory_bytes from 1 B to "
                            f"4 EiB, a whole number of bytes; got {d!r:.80})")
        out.append(Device(d["name"], str(d.get("kind", d["name"])), int(size), can_compute=d.get("kind") != "storage"))
    return out


def problem_for_plan(graph, doc: dict, *, budget=None, devices=None, objective=None, source: str = "the plan",
                     check: bool = False):
    """The problem a ``remat-plan/1`` document was written for: its devices
    (:func:`plan_devices`, or ``budget`` / ``devices`` specs) and the
    objective of its summary.

    Raises
    ------
    PlanError
        The document names no devices and none are given, or malformed ones.
    """
    from .problem import Problem, default_links

    if objective is None:
        objective = (doc.get("summary") or {}).get("objective") or "serial"
        objective = objective if objective in ("serial", "makespan") else "serial"
    if budget is None and not devices:
        devs = plan_devices(doc, source)
        return Problem(graph, devs, default_links(graph, [d.name for d in devs]), check=check, objective=objective)
    return Problem.from_specs(graph, devices, budget).with_objective(objective)


def _recompute_steps(plan) -> np.ndarray:
    """Steps that compute a node already computed earlier in the plan."""
    from .plan import OP_COMPUTE

    comp = np.flatnonzero(plan.op == OP_COMPUTE)
    first = np.zeros(comp.shape[0], dtype=bool)
    _, idx = np.unique(plan.node[comp], return_index=True)
    first[idx] = True
    return comp[~first]


def step_times(problem, plan) -> tuple[np.ndarray, np.ndarray]:
    """Start and end time of every step under the simulator's makespan rules
    (each device and each copy direction a stream, steps in plan order);
    ``nan`` for frees.

    Raises
    ------
    PlanError
        The plan is not executable, or the times disagree with the
        simulator's makespan.
    """
    from .plan import OP_COMPUTE, OP_COPY
    from .simulate import _device_map, simulate

    sim = simulate(problem, plan, check_budget=False)
    if not sim.valid:
        raise PlanError(f"cannot time an unexecutable plan: {sim.error}")
    g = problem.graph
    dmap = _device_map(problem, plan)
    dev = dmap[plan.device].tolist() if len(plan) else []
    tgt = [int(dmap[t]) if t >= 0 else -1 for t in plan.target.tolist()]
    cost = problem.cost_matrix
    bw, lat = problem.link_arrays
    n_dev = len(problem.devices)
    ready = np.zeros((n_dev, g.n))
    stream = [0.0] * n_dev
    cstream = np.zeros((n_dev, n_dev))
    start = np.full(len(plan), np.nan)
    end = np.full(len(plan), np.nan)
    pp, pi, nbytes = g.pred_ptr, g.pred_idx, g.bytes
    for k, (o, v) in enumerate(zip(plan.op.tolist(), plan.node.tolist())):
        d = dev[k]
        if o == OP_COMPUTE:
            s = stream[d]
            lo, hi = pp[v], pp[v + 1]
            if hi > lo:
                s = max(s, float(ready[d, pi[lo:hi]].max()))
            e = s + cost[d, v]
            stream[d] = e
            ready[d, v] = e
        elif o == OP_COPY:
            t = tgt[k]
            s = max(cstream[d, t], ready[d, v])
            e = s + lat[d, t] + nbytes[v] / bw[d, t]
            cstream[d, t] = e
            ready[t, v] = e
        else:
            continue
        start[k], end[k] = s, e
    span = float(np.nanmax(end)) if np.isfinite(end).any() else 0.0
    if abs(span - sim.makespan) > 1e-9 * max(1.0, sim.makespan):
        raise PlanError(f"step times end at {span!r} but the simulator's makespan is {sim.makespan!r}")
    return start, end


def _merged(starts: np.ndarray, ends: np.ndarray, tol: float) -> list[tuple[float, float]]:
    """Intervals with gaps under ``tol`` merged (bounded bar count)."""
    order = np.argsort(starts, kind="stable")
    out: list[list[float]] = []
    for s, e in zip(starts[order].tolist(), ends[order].tolist()):
        if out and s - out[-1][1] <= tol:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, max(e - s, 0.0)) for s, e in out]


def _gantt(ax, problem, plan, max_points: int) -> None:
    from matplotlib.patches import Patch

    from .plan import OP_COMPUTE, OP_COPY
    from .simulate import _device_map

    start, end = step_times(problem, plan)
    span = float(np.nanmax(end)) if np.isfinite(end).any() else 1.0
    scale, unit = _time_unit(span)
    tol = span / (4 * max_points)
    dmap = _device_map(problem, plan)
    dev = dmap[plan.device] if len(plan) else plan.device
    tgt = np.where(plan.target >= 0, dmap[np.maximum(plan.target, 0)], -1) if len(plan) else plan.target
    names = [d.name for d in problem.devices]
    recompute = np.zeros(len(plan), dtype=bool)
    recompute[_recompute_steps(plan)] = True
    lanes = []  # (label, [(mask, color)])
    for i, d in enumerate(problem.devices):
        if d.can_compute:
            base = (plan.op == OP_COMPUTE) & (dev == i)
            lanes.append((f"{d.name} compute", [(base & ~recompute, _COMPUTE), (base & recompute, _RECOMPUTE)]))
    pairs = sorted({(int(a), int(b)) for a, b in zip(dev[plan.op == OP_COPY], tgt[plan.op == OP_COPY])})
    for a, b in pairs:
        lanes.append((f"copy {names[a]}\u2192{names[b]}", [((plan.op == OP_COPY) & (dev == a) & (tgt == b), _COPY_IN)]))
    for y, (_, parts) in enumerate(lanes):
        for mask, color in parts:
            if mask.any():
                bars = [(s / scale, w / scale) for s, w in _merged(start[mask], end[mask], tol)]
                ax.broken_barh(bars, (y - 0.35, 0.7), facecolors=color, edgecolors="none")
    ax.set_yticks(range(len(lanes)), [lbl for lbl, _ in lanes])
    ax.set_ylim(len(lanes) - 0.4, -0.6)
    ax.axvline(span / scale, color="black", lw=1, ls=":")
    ax.set_xlabel(f"time ({unit})")
    ax.set_xlim(0, span / scale * 1.01)
    handles = [Patch(color=_COMPUTE, label="compute"), Patch(color=_RECOMPUTE, label="recompute")]
    if pairs:
        handles.append(Patch(color=_COPY_IN, label="copy"))
    ax.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0), fontsize=8, ncols=len(handles),
              frameon=False)
    ax.set_title("schedule: each device and copy direction a stream", fontsize=9, loc="left")
    ax.set_title(f"makespan {span / scale:.4g} {unit}", fontsize=9, loc="right")


def _memory_panel(ax, problem, plan, sim, d: int, max_points: int, recompute: np.ndarray, show_x: bool) -> None:
    from .plan import OP_COPY
    from .simulate import _device_map

    dev = problem.devices[d]
    y = sim.timeline[:, d].astype(np.float64) if sim.timeline.shape[0] else np.zeros(1)
    k = y.shape[0]
    budget = float(dev.memory_bytes)
    scale, unit = _unit(max(budget, float(y.max(initial=0.0))))
    x, lo, hi = _envelope(y / scale, max_points)
    peak_all = float(y.max(initial=0.0))
    off_scale = peak_all < 0.25 * budget  # a roomy device (host memory): scale to its use, name the budget
    if off_scale:
        scale, unit = _unit(max(peak_all, 1.0))
        x, lo, hi = _envelope(y / scale, max_points)
        ax.fill_between(x, lo, hi, color=_COMPUTE, alpha=0.25, lw=0, step="mid")
        ax.step(x, hi, where="mid", color=_COMPUTE, lw=0.9, label="memory")
        bscale, bunit = _unit(budget)
        ax.plot([], [], color=_BUDGET, ls="--", lw=1.2, label=f"budget {budget / bscale:.4g} {bunit} (off scale)")
    else:
        ax.fill_between(x, lo, hi, color=_COMPUTE, alpha=0.25, lw=0, step="mid")
        ax.step(x, hi, where="mid", color=_COMPUTE, lw=0.9, label="memory")
        ax.axhline(budget / scale, color=_BUDGET, ls="--", lw=1.2, label=f"budget {budget / scale:.4g} {unit}")
    dmap = _device_map(problem, plan)
    pdev = dmap[plan.device][:k] if len(plan) else plan.device
    ptgt = np.where(plan.target >= 0, dmap[np.maximum(plan.target, 0)], -1)[:k] if len(plan) else plan.target
    rc = recompute[(recompute < k)]
    rc = rc[pdev[rc] == d]
    copies = np.flatnonzero(plan.op[:k] == OP_COPY)
    marks = ((rc, _RECOMPUTE, "o", "recomputation ({})"),
             (copies[ptgt[copies] == d], _COPY_IN, "^", "copy in ({})"),
             (copies[pdev[copies] == d], _COPY_OUT, "v", "copy out ({})"))
    for row, (steps, color, marker, label) in enumerate(marks):
        if steps.size == 0:
            continue
        pos = np.minimum(_bucketed(steps, k, max_points), k - 1)
        if pos.size <= max_points // 20:  # few: on the curve
            ax.plot(pos, y[pos] / scale, ls="none", marker=marker, ms=3.5, color=color, alpha=0.8,
                    label=label.format(steps.size))
        else:  # many: a rug along the bottom (one tick per occupied bucket)
            ax.plot(pos, np.full(pos.shape, 0.025 + 0.04 * row), ls="none", marker="|", ms=5, mew=0.6,
                    color=color, alpha=0.6, transform=ax.get_xaxis_transform(), label=label.format(steps.size))
    if k and y.max() > 0:
        kp = int(y.argmax())
        peak = y[kp]
        ax.plot([kp], [peak / scale], marker="*", ms=10, color="black", ls="none")
        ax.annotate(f"peak {peak / scale:.4g} {unit} ({100 * peak / budget:.1f}% of budget) at step {kp}",
                    xy=(kp, peak / scale), xytext=(min(max(kp / max(k, 1), 0.2), 0.8), 0.985),
                    textcoords="axes fraction", ha="center", va="top",
                    fontsize=8, arrowprops={"arrowstyle": "->", "lw": 0.7, "color": "black"})
    top = (peak_all if off_scale else max(budget, peak_all)) / scale
    ax.set_ylim(0, top * 1.25)
    ax.set_xlim(-0.5, max(k - 0.5, 0.5))
    ax.set_ylabel(f"{dev.name} memory ({unit})")
    if show_x:
        ax.set_xlabel("plan step")
    ax.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), fontsize=7, ncols=5, frameon=False)
    ax.grid(alpha=0.25)


def timeline(problem, plan, *, kind: str = "auto", max_points: int = 2000, title: str | None = None, path=None,
             overwrite: bool = False):
    """Memory over the steps of ``plan`` on each device (and a Gantt chart).

    Parameters
    ----------
    problem : Problem
    plan : Plan
    kind : {"auto", "memory", "gantt"}
        ``auto``: add the Gantt chart when the problem's objective is the
        makespan.
    max_points : int
        At most this many points (buckets) per curve.
    title : str, optional
    path : str, optional
        Also save the figure there (:func:`save`).

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    PlanError
        The plan does not match the problem or cannot be executed (budget
        overruns are drawn, not refused).
    """
    from .simulate import simulate

    if kind not in ("auto", "memory", "gantt"):
        raise HybridRematError(f"unknown timeline kind {kind!r}: use auto, memory or gantt")
    if max_points < 10:
        raise HybridRematError(f"max_points must be at least 10, not {max_points}")
    measured = simulate(problem, plan, check_budget=False)
    if not measured.valid:
        raise PlanError(f"the plan cannot be executed: {measured.error}")
    checked = simulate(problem, plan)
    objective = problem.objective
    gantt = kind == "gantt" or (kind == "auto" and objective.name == "makespan")
    n_dev = len(problem.devices)
    heights = ([1.0 + 0.45 * _lanes(problem, plan)] if gantt else []) + [2.6] * n_dev
    fig = _figure(11.0, sum(heights) + 0.8)
    axes = fig.subplots(len(heights), 1, gridspec_kw={"height_ratios": heights}, squeeze=False)[:, 0]
    if gantt:
        _gantt(axes[0], problem, plan, max_points)
    mem_axes = axes[1:] if gantt else axes
    recompute = _recompute_steps(plan)
    for d, ax in enumerate(mem_axes):
        _memory_panel(ax, problem, plan, measured, d, max_points, recompute, show_x=d == n_dev - 1)
        if d:
            ax.sharex(mem_axes[0])
    value = objective.value(measured)
    tdi = objective.tdi_pct(problem, value)
    status = "valid" if checked.valid else f"NOT VALID: {checked.error}"
    head = title or f"{problem.graph.name}: {len(plan)} steps, {measured.n_recompute} recomputations"
    fig.suptitle(f"{head}\n{objective.name} {value:.6g} s (TDI {tdi:.2f}%), {status}", fontsize=10)
    if path is not None:
        save(fig, path, overwrite=overwrite)
    return fig


def _lanes(problem, plan) -> int:
    from .plan import OP_COPY

    pairs = {(int(a), int(b)) for a, b in zip(plan.device[plan.op == OP_COPY], plan.target[plan.op == OP_COPY])}
    return sum(d.can_compute for d in problem.devices) + len(pairs)


def _records(rows) -> list[dict]:
    if hasattr(rows, "to_dict"):
        rows = rows.to_dict("records")
    return [dict(r) for r in rows]


def _num(x) -> float:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return float("nan")
    return x


def pareto(rows, path=None, *, overwrite: bool = False, title: str | None = None):
    """Budget vs TDI% per graph (one panel each), one line per solver, the
    gap down to the lower bound as a band; proved optima filled, budgets
    without a plan marked on the axis.

    Parameters
    ----------
    rows : list of dict or pandas.DataFrame
        Rows of :func:`hybrid_remat.sweep.sweep` (or its CSV read back).
    path : str, optional
        Also save the figure there.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    rows = _records(rows)
    if not rows:
        raise HybridRematError("no rows to plot")
    graphs = list(dict.fromkeys(r["graph"] for r in rows))
    solvers = list(dict.fromkeys(r["solver"] for r in rows))
    ncols = min(3, len(graphs))
    nrows = math.ceil(len(graphs) / ncols)
    fig = _figure(4.6 * ncols + 0.4, 3.6 * nrows + 0.9)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    colors = [f"C{i % 10}" for i in range(len(solvers))]
    for ax, gname in zip(axes, graphs):
        mine = [r for r in rows if r["graph"] == gname]
        nplans = 0
        for solver, color in zip(solvers, colors):
            pts = sorted((r for r in mine if r["solver"] == solver), key=lambda r: -_num(r["budget_pct"]))
            ok = [r for r in pts if math.isfinite(_num(r["tdi_pct"]))]
            if ok:
                nplans += 1
                x = np.array([_num(r["budget_pct"]) for r in ok])
                y = np.array([_num(r["tdi_pct"]) for r in ok])
                lb = np.array([_num(r["lower_bound_tdi_pct"]) for r in ok])
                has = np.isfinite(lb)
                if has.any():
                    ax.fill_between(x[has], np.minimum(lb[has], y[has]), y[has], color=color, alpha=0.18, lw=0)
                    ax.plot(x[has], lb[has], color=color, lw=0.8, ls=":")
                ax.plot(x, y, color=color, lw=1.4)
                opt = np.array([r["status"] == "optimal" for r in ok])
                ax.plot(x[opt], y[opt], ls="none", marker="o", ms=6, color=color, mec="black", mew=0.6)
                ax.plot(x[~opt], y[~opt], ls="none", marker="o", ms=6, mfc="white", color=color, mew=1.2)
            for r in pts:
                if not math.isfinite(_num(r["tdi_pct"])) and math.isfinite(_num(r["budget_pct"])):
                    ax.plot([_num(r["budget_pct"])], [0.02], marker="x", color=color, ls="none", ms=7,
                            transform=ax.get_xaxis_transform(), clip_on=False)
        n = next((r.get("n") for r in mine if r.get("n") not in (None, "")), None)
        ax.set_title(f"{gname}" + (f" ({int(n)} nodes)" if n is not None and _num(n) == _num(n) else ""), fontsize=10)
        ax.set_xlabel("budget (% of keep-all peak)")
        ax.set_ylabel("TDI % (time overhead)")
        ax.invert_xaxis()
        ax.set_ylim(bottom=min(0.0, ax.get_ylim()[0]))
        ax.grid(alpha=0.3)
        if not nplans:
            ax.text(0.5, 0.5, "no plan at any budget", transform=ax.transAxes, ha="center", color="grey")
    for ax in axes[len(graphs):]:
        ax.set_visible(False)
    handles = [Line2D([], [], color=c, lw=1.4, marker="o", mfc="white", label=s) for s, c in zip(solvers, colors)]
    handles += [Patch(color="grey", alpha=0.25, label="gap to lower bound"),
                Line2D([], [], ls="none", marker="o", color="grey", mec="black", label="proved optimal"),
                Line2D([], [], ls="none", marker="x", color="grey", label="no plan (budget too small or none found)")]
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4), fontsize=8)
    fig.suptitle(title or "Time overhead vs memory budget", fontsize=11)
    if path is not None:
        save(fig, path, overwrite=overwrite)
    return fig
