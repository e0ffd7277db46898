"""segment_resolve honours its deadline at 100k nodes: decoder_varied 100k at 50 %, the dtr_size plan as
the start, SegmentResolve for 1 s and 3 s (wall, CPU, TDI before and after, validity by the simulator).

Usage: ``python3 -m benchmarks.segment_resolve_deadline``
"""
import os
import time

from hybrid_remat.families import family_graph
from hybrid_remat.heuristics.dtr import DTR
from hybrid_remat.heuristics.segment_resolve import SegmentResolve
from hybrid_remat.limits import Limits
from hybrid_remat.problem import Problem
from hybrid_remat.simulate import simulate

p = Problem.single(family_graph("decoder_varied", 100000, 0), "50%")
start = DTR("size", name="dtr_size").run(p)
SegmentResolve().warmup()
for s in (1.0, 3.0):
    t0, c0 = time.perf_counter(), time.process_time()
    out = SegmentResolve().improve(p, start, limits=Limits.seconds(s))
    print(f"limit {s}: wall {time.perf_counter()-t0:.2f} cpu {time.process_time()-c0:.2f} tdi {simulate(p,start).tdi_pct:.4f} -> {simulate(p,out).tdi_pct:.4f} valid {simulate(p,out).valid} load {os.getloadavg()[0]:.1f}", flush=True)
