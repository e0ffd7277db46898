"""Structure detection inside a solve's time limit (issue 20, "a time limit is a promise").

``anytime_solve`` detects a graph's structure after its first plan, with at most
``STRUCTURE_SHARE`` of the time left; a detection that cannot finish leaves the
components that need it out and the report says so.  No wall-clock asserts: the
"tiny limit" cases are ones no machine can finish (detection does not start
below ``DETECT_S_PER_ITEM`` per node and edge, or its share is set to zero).
"""

import threading

import numpy as np
import pytest

from hybrid_remat import anytime
from hybrid_remat.anytime import anytime_solve
from hybrid_remat.blocks.detect import STOPPED, _op_codes, detect_runs
from hybrid_remat.families import family_graph
from hybrid_remat.limits import Limits
from hybrid_remat.problem import Problem
from hybrid_remat.segments.chain import STRUCTURE_KEYS, derive_structure, forget_stopped, segment_chain
from hybrid_remat.simulate import simulate

FAMILIES = ("decoder_checkmate", "decoder_varied", "unet", "resnet_stages", "random_layered")


def _derived(g) -> dict:
    return g.__dict__.get("_derived", {})


def _same_structure(a, b) -> None:
    assert a.notes == b.notes and a.stopped == b.stopped and len(a.runs) == len(b.runs)
    for x, y in zip(a.runs, b.runs, strict=True):
        assert np.array_equal(x.fwd, y.fwd) and np.array_equal(x.bwd, y.bwd) and x.same_costs == y.same_costs


@pytest.fixture(scope="module")
def big():
    """A 100k-node family graph (the size the promise is about)."""
    return family_graph("decoder_checkmate", 100_000, 0)


def test_op_codes_are_first_appearance_indices():
    for ops in (["b", "a", "b", "c", "a"], [None, "x", 3, None, 3, "x"], []):
        ref: dict = {}
        want = [ref.setdefault(o, len(ref)) for o in ops]
        assert _op_codes(ops, len(ops)).tolist() == want


@pytest.mark.parametrize("family", FAMILIES)
def test_detection_within_limits_finds_what_it_finds_without(family):
    g = family_graph(family, 2000, 0)
    free = detect_runs(g)
    _same_structure(detect_runs(family_graph(family, 2000, 0), limits=Limits.seconds(600.0)), free)
    h = family_graph(family, 2000, 0)
    assert derive_structure(h, Limits.seconds(600.0))["status"] == "done"
    _same_structure(_derived(h)["runs"], free)
    ch, ref = _derived(h)["segment_chain"], segment_chain(g, structure=free)
    assert ch.n_stages == ref.n_stages and np.array_equal(ch.kind, ref.kind) and np.array_equal(ch.stage, ref.stage)
    assert derive_structure(h)["status"] == "cached"


def test_stopped_detection_leaves_stand_ins_until_forgotten():
    g = family_graph("unet", 2000, 0)
    flag = threading.Event()
    flag.set()
    out = derive_structure(g, Limits(stop=flag))
    assert out["status"] == "stopped" and out["note"] == STOPPED
    st = _derived(g)["runs"]
    assert st.stopped and st.runs == [] and st.why_not == STOPPED
    assert _derived(g)["blocks"] is None and _derived(g)["segment_chain"] is None
    forget_stopped(g)
    assert not any(k in _derived(g) for k in STRUCTURE_KEYS)
    assert derive_structure(g)["status"] == "done"
    _same_structure(_derived(g)["runs"], detect_runs(family_graph("unet", 2000, 0)))


def test_a_stop_midway_returns_a_stopped_structure():
    """Limits that expire after some checks (a fake limits object): a stopped structure, never a
    part of one; with one check more than detection makes, the structure found without limits."""
    g = family_graph("resnet_stages", 2000, 0)

    class StopsAfter:                    # expired from its k-th check on
        def __init__(self, k):
            self.k, self.checks = k, 0

        def expired(self):
            self.checks += 1
            return self.checks > self.k

    count = StopsAfter(10**9)
    free = detect_runs(g, limits=count)
    assert count.checks >= 10 and free.runs          # checked often, between its steps
    for k in sorted({0, 1, count.checks // 2, count.checks - 1}):
        st = detect_runs(g, limits=StopsAfter(k))
        assert st.stopped and st.runs == [] and st.notes == [STOPPED], k
    _same_structure(detect_runs(g, limits=StopsAfter(count.checks)), detect_runs(g))


def test_tiny_limit_at_100k_leaves_detection_out(big):
    """0.05 s: detection's share is below what it needs on any machine; the report says so, the
    promise of no plan reported that the simulator rejects holds, and nothing stays with the graph."""
    p = Problem.single(big, "50%")
    r = anytime_solve(p, 0.05, workers=1)
    assert r.stats["structure"]["status"] == "stopped", r.stats.get("structure")
    row = [x for x in r.report if x.source == "structure"]
    assert len(row) == 1 and row[0].status == "stopped" and row[0].note == STOPPED
    assert r.plan is None or simulate(p, r.plan).valid
    assert not any(k in _derived(big) for k in STRUCTURE_KEYS)


def test_detection_stopped_solve_still_plans_at_100k(big, monkeypatch):
    """Detection given no time (its share 0, as when the first plan took the time left): the solve
    goes on without it, with a valid plan, the structure's components declined, the report saying why."""
    monkeypatch.setattr(anytime, "STRUCTURE_SHARE", 0.0)
    p = Problem.single(big, "50%")
    r = anytime_solve(p, 120.0, workers=1, heuristics=["dtr_belady"], bounds=["block_bound"], improvers=[],
                      formulations=["segments", "blocks"])
    assert r.plan is not None and simulate(p, r.plan).valid
    assert r.stats["structure"] == {"status": "stopped", "seconds": r.stats["structure"]["seconds"], "note": STOPPED}
    rows = {x.source: x for x in r.report}
    assert rows["structure"].status == "stopped" and rows["structure"].note == STOPPED
    for name in ("block_bound", "segments", "blocks"):
        assert rows[name].status == "skipped" and STOPPED in rows[name].note, (name, rows[name])  # not "none found"
    assert rows["dtr_belady"].status == "valid"
    assert not any(k in _derived(big) for k in STRUCTURE_KEYS)


def test_detection_that_finishes_serves_the_solve():
    g = family_graph("decoder_checkmate", 2000, 0)
    p = Problem.single(g, "50%")
    r = anytime_solve(p, 120.0, workers=1, heuristics=["dtr_belady"], bounds=["block_bound"], improvers=[],
                      formulations=[], node_limit=50)
    assert r.stats["structure"]["status"] == "done"
    rows = {x.source: x for x in r.report}
    assert rows["structure"].status == "done" and rows["block_bound"].status != "skipped"
    _same_structure(_derived(g)["runs"], detect_runs(family_graph("decoder_checkmate", 2000, 0)))
    assert r.plan is not None and simulate(p, r.plan).valid and r.lower_bound <= r.objective
