"""Where the benchmark scripts find the repository and the public instances.

``../shared/benchmarks/moccasin`` beside the repository (a git worktree one
level deeper finds it one level higher).  The instances are read from there,
never copied into the project (licence).
"""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

_CANDIDATES = (ROOT.parent / "shared" / "benchmarks" / "moccasin", ROOT.parent.parent / "shared" / "benchmarks" / "moccasin")
SHARED = next((c for c in _CANDIDATES if c.is_dir()), _CANDIDATES[0])
