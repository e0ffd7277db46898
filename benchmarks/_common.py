"""What the benchmark scripts share: where the instances are, the Moccasin
reference table (typed here once), and how results are written.

Run every script as a module from the repository root, e.g.
``python -m benchmarks.optimality --quick``: the repository is then first on
``sys.path`` (no script inserts into it) and ``from benchmarks._common import
...`` works.  Public graphs are read in place from
``../shared/benchmarks/moccasin`` (or ``$HYBRID_REMAT_MOCCASIN_DIR``), never
copied (licence).  Results go to ``benchmarks/results/``.

Examples
--------
>>> from benchmarks._common import moccasin_target, MOCCASIN_REFERENCE
>>> moccasin_target("CM1", 0.9), moccasin_target("RLG2", 0.9), moccasin_target("RLG3", 0.9)
(0.03, 0.9, None)
>>> MOCCASIN_REFERENCE[("RLG2", 0.8)]
Reference(published=4.9, rerun_2core='none')
"""

from __future__ import annotations

import csv
import json
import math
import os
import pathlib
import subprocess
import sys
from collections.abc import Iterable, Sequence
from typing import NamedTuple

__all__ = [
    "ROOT", "DATASETS", "RESULTS", "LLAMA", "SHARED", "moccasin_dir", "moccasin_graph", "moccasin_graphs", "profiled_graphs",
    "stem", "MOCCASIN_INSTANCES", "MOCCASIN_IDS", "MOCCASIN_REFERENCE", "NO_PLAN", "Reference", "moccasin_id",
    "moccasin_reference", "moccasin_target", "moccasin_reported", "reference_cell", "fmt", "command",
    "write_results", "require_plugin", "tdi_of",
]

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATASETS = ROOT / "datasets"
RESULTS = ROOT / "benchmarks" / "results"
#: the profiled llama layer graph the scale benchmarks repeat (``repeat_layers(load_graph(LLAMA), L)``)
LLAMA = DATASETS / "llama_8l_b4_s512.json.gz"


def moccasin_dir() -> pathlib.Path | None:
    """The public Moccasin/Checkmate graphs: ``$HYBRID_REMAT_MOCCASIN_DIR``, or
    ``shared/benchmarks/moccasin`` beside the repository (a git worktree one
    level deeper finds it one level higher)."""
    env = os.environ.get("HYBRID_REMAT_MOCCASIN_DIR")
    for cand in ([pathlib.Path(env)] if env else []) + [ROOT.parent / "shared" / "benchmarks" / "moccasin",
                                                        ROOT.parent.parent / "shared" / "benchmarks" / "moccasin"]:
        if cand.is_dir():
            return cand.resolve()
    return None


#: the Moccasin directory (a path that does not exist when it is missing: scripts say so)
SHARED = moccasin_dir() or ROOT.parent / "shared" / "benchmarks" / "moccasin"


def moccasin_graph(name: str) -> pathlib.Path:
    """``rlg_n100`` -> the path of ``rlg_n100.json`` in :data:`SHARED`."""
    return SHARED / f"{name}.json"


def moccasin_graphs(pattern: str) -> list[pathlib.Path]:
    """Sorted public graphs matching ``pattern`` (``"*_train.json"``); none when absent."""
    return sorted(SHARED.glob(pattern)) if SHARED.is_dir() else []


def profiled_graphs(names: Sequence[str] | None = None) -> list[pathlib.Path]:
    """The profiled graphs of ``datasets/`` (sorted), or those whose stem is in ``names``."""
    files = sorted(DATASETS.glob("*.json.gz"))
    return [f for f in files if names is None or stem(f) in names]


def stem(path) -> str:
    """``datasets/resnet18_b64.json.gz`` -> ``resnet18_b64``."""
    b = os.path.basename(os.fspath(path))
    for ext in (".json.gz", ".json", ".gz"):
        if b.endswith(ext):
            return b[: -len(ext)]
    return b


# ------------------------------------------------------------ Moccasin reference
#: the 12 instances of Moccasin's protocol: 6 graphs at 0.9 and 0.8 of the keep-all peak
MOCCASIN_INSTANCES = (
    ("RLG1", "rlg_n100"), ("RLG2", "rlg_n250"), ("RLG3", "rlg_n500"), ("RLG4", "rlg_n1000"),
    ("CM1", "fcn_8_vgg_b32_416x608_train"), ("CM2", "resnet50_b256_224x224_train"),
)
MOCCASIN_IDS = {name: iid for iid, name in MOCCASIN_INSTANCES}
#: the 2-core re-run of Moccasin returned no plan
NO_PLAN = "none"


class Reference(NamedTuple):
    """Moccasin's TDI% on one instance: ``published`` (ICML 2023, C = 2, 16
    workers, 1800-3600 s; ``None`` = no published value) and ``rerun_2core``
    (its re-run on a 2-core machine, 120 s per phase; :data:`NO_PLAN` = it
    returned none).  Source: ``shared/benchmarks/moccasin/README.md``."""

    published: float | None
    rerun_2core: float | str | None


MOCCASIN_REFERENCE = {
    ("RLG1", 0.9): Reference(None, 0.79), ("RLG1", 0.8): Reference(None, 2.30),
    ("RLG2", 0.9): Reference(0.9, 2.89), ("RLG2", 0.8): Reference(4.9, NO_PLAN),
    ("RLG3", 0.9): Reference(None, NO_PLAN), ("RLG3", 0.8): Reference(None, NO_PLAN),
    ("RLG4", 0.9): Reference(0.7, NO_PLAN), ("RLG4", 0.8): Reference(3.4, NO_PLAN),
    ("CM1", 0.9): Reference(0.0, 0.03), ("CM1", 0.8): Reference(0.1, 0.14),
    ("CM2", 0.9): Reference(0.2, 0.11), ("CM2", 0.8): Reference(0.3, 0.28),
}


def moccasin_id(name_or_id: str) -> str | None:
    """``rlg_n100`` or ``RLG1`` -> ``RLG1``; ``None`` for other graphs."""
    return name_or_id if name_or_id in dict(MOCCASIN_INSTANCES) else MOCCASIN_IDS.get(name_or_id)


def moccasin_reference(name_or_id: str, fraction: float) -> Reference | None:
    iid = moccasin_id(name_or_id)
    return MOCCASIN_REFERENCE.get((iid, round(float(fraction), 2))) if iid else None


def moccasin_target(name_or_id: str, fraction: float) -> float | None:
    """The value to match: the better of the published value (rounded to one
    decimal, so it stands for anything up to 0.05 more) and the 2-core re-run."""
    ref = moccasin_reference(name_or_id, fraction)
    if ref is None:
        return None
    rerun = ref.rerun_2core if isinstance(ref.rerun_2core, float) else None
    if ref.published is None:
        return rerun
    if rerun is not None and rerun <= ref.published + 0.05:
        return rerun
    return ref.published


def moccasin_reported(name_or_id: str, fraction: float) -> float | None:
    """The published value, else the 2-core re-run's (the heuristics table's column)."""
    ref = moccasin_reference(name_or_id, fraction)
    if ref is None:
        return None
    if ref.published is not None:
        return ref.published
    return ref.rerun_2core if isinstance(ref.rerun_2core, float) else None


def reference_cell(x, nd: int = 2) -> str:
    """A reference value for a table: ``-`` (none), ``none`` (no plan) or the number."""
    if x is None:
        return "-"
    if x == NO_PLAN:
        return NO_PLAN
    return f"{x:.{nd}f}"


# ------------------------------------------------------------------- output
def fmt(x, nd: int = 3, none: str = "-") -> str:
    """A number for a table (``none`` for missing or non-finite values)."""
    if x is None or isinstance(x, str) or (isinstance(x, float) and not math.isfinite(x)):
        return none if not isinstance(x, str) else x
    return f"{x:.{nd}f}"


def tdi_of(problem, value) -> float | None:
    """TDI% of a value of ``problem``'s objective (``None`` if missing)."""
    if value is None or not math.isfinite(value):
        return None
    return problem.objective.tdi_pct(problem, value)


def command(script: str, argv: Sequence[str] | None = None) -> str:
    """How a table was made: ``python -m benchmarks.NAME ARGS``."""
    args = list(sys.argv[1:] if argv is None else argv)
    return " ".join(["python -m", f"benchmarks.{stem(script).removesuffix('.py')}", *args])


def write_results(name: str, *, markdown: str | None = None, json_doc=None, csv_rows: Iterable[dict] | None = None,
                  columns: Sequence[str] | None = None, directory=None) -> list[pathlib.Path]:
    """Write ``<directory or benchmarks/results>/<name>.{md,json,csv}`` (those given);
    ``name`` may also be a path prefix.  Returns the paths written."""
    prefix = pathlib.Path(name)
    if not prefix.is_absolute() and prefix.parent == pathlib.Path("."):
        prefix = pathlib.Path(directory or RESULTS) / name
    prefix.parent.mkdir(parents=True, exist_ok=True)
    written = []
    if markdown is not None:
        path = prefix.with_name(prefix.name + ".md")
        path.write_text(markdown if markdown.endswith("\n") else markdown + "\n")
        written.append(path)
    if json_doc is not None:
        path = prefix.with_name(prefix.name + ".json")
        path.write_text(json.dumps(json_doc, indent=1, default=str))
        written.append(path)
    if csv_rows is not None:
        rows = list(csv_rows)
        path = prefix.with_name(prefix.name + ".csv")
        cols = list(columns or (rows[0].keys() if rows else []))
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)
        written.append(path)
    return written


def require_plugin(module: str, directory: str):
    """Import an optional plugin package, or stop with how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise SystemExit(f"{module} is not installed: pip install ./plugins/{directory}") from None


def row_in_subprocess(module: str, spec: str) -> dict | None:
    """One row of a benchmark in a fresh process (``python -m module --row
    spec``, cwd the repository root): the JSON after its ``ROW `` line, or
    ``None`` (its stderr tail printed) when it gave none."""
    res = subprocess.run([sys.executable, "-m", module, "--row", spec], cwd=ROOT, capture_output=True, text=True)
    line = next((x for x in res.stdout.splitlines() if x.startswith("ROW ")), None)
    if line is None:
        print(f"{spec}: failed\n{res.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(line[4:])
