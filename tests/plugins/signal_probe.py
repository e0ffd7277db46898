"""Components that mark the phase a solve is in, for the signal matrix
(tests/test_signal_matrix.py): each prints ``PHASE <name>`` on stdout when
it starts, then takes long (until its stop flag), so that a signal sent
after the mark arrives in that phase.

* ``probe_warmup`` (heuristic): a warm-up that takes 600 s, as a first-run
  Numba compile does (one long call the signal handler cannot return into).
* ``probe_heuristic`` (heuristic): runs until its limits stop it.
* ``probe_scip`` (formulation): a real SCIP solve through the project's SCIP
  layer (a market-split instance, hard for branch and bound), until its
  limits stop it.
"""

import os
import time

import numpy as np

from hybrid_remat import hookimpl
from hybrid_remat.interfaces import Formulation, FormulationResult, Heuristic

CAPS = frozenset({"dag", "chain", "single_device", "honours_limits", "needs_budget"})


def _mark(phase: str) -> None:
    os.write(1, f"PHASE {phase} pid {os.getpid()}\n".encode())


def _wait(limits) -> None:
    while limits is not None and not limits.expired() and not (limits.stop is not None and limits.stop.is_set()):
        time.sleep(0.02)


class ProbeWarmup(Heuristic):
    name = "probe_warmup"
    version = "1"
    capabilities = CAPS
    run_by_default = False

    def warmup(self):
        _mark("warmup")
        time.sleep(600)

    def run(self, problem, *, seed=0, limits=None):
        return None


class ProbeHeuristic(Heuristic):
    name = "probe_heuristic"
    version = "1"
    capabilities = CAPS
    run_by_default = False
    rank = 100.0

    def run(self, problem, *, seed=0, limits=None):
        _mark("heuristic")
        _wait(limits)
        return None


class ProbeScip(Formulation):
    name = "probe_scip"
    version = "1"
    capabilities = CAPS
    run_by_default = False

    def solve(self, problem, *, incumbent=None, limits=None, seed=0, on_incumbent=None, on_bound=None):
        from hybrid_remat.scip import run, scip_model
        from hybrid_remat.scip.solve import solve_limits

        lim = solve_limits(limits)
        rng = np.random.default_rng(7)
        a = rng.integers(0, 100, size=(4, 36))
        with scip_model("probe_market_split", params={"presolve": "OFF", "separating": "OFF"}) as m:
            x = [m.addVar(vtype="B") for _ in range(a.shape[1])]
            for row in a:
                rhs = int(row.sum()) // 2
                s_pos, s_neg = m.addVar(lb=0), m.addVar(lb=0)
                m.addCons(sum(int(c) * xi for c, xi in zip(row, x)) + s_pos - s_neg == rhs)
            m.setObjective(sum(m.getVars()[a.shape[1]:]), "minimize")
            _mark("scip")
            res = run(m, limits=lim)
            res.reraise()
        return FormulationResult("no_solution", stats={"probe": res.scip_status})


@hookimpl
def hybrid_remat_register_heuristics():
    return [ProbeWarmup(), ProbeHeuristic()]


@hookimpl
def hybrid_remat_register_formulations():
    return [ProbeScip()]
