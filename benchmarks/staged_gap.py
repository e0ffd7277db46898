"""How often the staged plan class (Checkmate's MILP) misses the best plan.

On random graphs of 3-7 nodes at random feasible budgets, compare the
brute-force optimum over *all* plans with the brute-force optimum over
*staged* plans (first computations in index order, the class the Checkmate
MILP represents), and count the instances where the staged class is worse.

Usage (from the repository root)::

    python -m benchmarks.staged_gap              # 80 instances (tests/test_exact_checkmate.py's generator)
    python -m benchmarks.staged_gap --seeds 1    # a reduced run
"""

import argparse

from hybrid_remat.oracle import brute_force
from tests.test_exact_checkmate import tiny_problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-seed", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=8)
    args = ap.parse_args()
    total = worse = empty = 0
    worst = 0.0
    for seed in range(args.seeds):
        for p in tiny_problems(args.per_seed, seed):
            total += 1
            staged, overall = brute_force(p, "staged")[0], brute_force(p)[0]
            if staged == float("inf"):
                empty += int(overall < float("inf"))
                continue
            if staged > overall + 1e-9:
                worse += 1
                worst = max(worst, (staged - overall) / overall * 100)
    print(f"{total} instances: staged optimum worse than the overall optimum in {worse} "
          f"(worst by {worst:.1f}%); staged class empty while a plan exists in {empty}")


if __name__ == "__main__":
    main()
