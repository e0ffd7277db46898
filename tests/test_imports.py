"""No import cycles in hybrid_remat: the import graph built from the source,
every ``import`` statement counted (function-level ones included: a cycle
that only a deferred import hides is still two modules that need each
other)."""

from __future__ import annotations

import ast
import functools
import pathlib

import networkx as nx

ROOT = pathlib.Path(__file__).resolve().parents[1] / "hybrid_remat"


def import_graph() -> nx.DiGraph:
    """``a -> b``: module ``a`` imports module ``b`` (``from p import m``
    names the submodule ``p.m`` where there is one, else the package).
    A copy of the graph parsed once per process (every test reads it)."""
    return _parsed_import_graph().copy()


@functools.cache
def _parsed_import_graph() -> nx.DiGraph:
    mods = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        mods[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    g = nx.DiGraph()
    for name, (path, is_pkg) in mods.items():
        g.add_node(name)
        package = name if is_pkg else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                subs = [f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in mods]
                targets += subs + ([mod] if len(subs) < len(node.names) else [])
            elif isinstance(node, ast.Import):
                targets += [a.name for a in node.names]
            g.add_edges_from((name, t) for t in targets if t in mods and t != name)
    return g


def test_the_graph_holds_what_the_source_says():
    g = import_graph()
    assert g.has_edge("hybrid_remat.anytime", "hybrid_remat.portfolio")          # module level
    assert g.has_edge("hybrid_remat.plan", "hybrid_remat.core.plans")            # module level, relative
    assert g.has_edge("hybrid_remat.anytime", "hybrid_remat.heuristics")         # inside a function
    assert g.has_edge("hybrid_remat.portfolio.reduce", "hybrid_remat.core.devices")
    assert g.number_of_nodes() > 100


def test_no_import_cycles():
    cycles = [c for c in nx.strongly_connected_components(import_graph()) if len(c) > 1]
    assert not cycles, f"import cycles: {[sorted(c) for c in cycles]}"


def test_the_portfolio_and_core_sit_below_what_uses_them():
    g = import_graph()
    core = {n for n in g if n.startswith("hybrid_remat.core")}
    below_core = set().union(*(nx.descendants(g, n) for n in core))
    # core builds plans for the solvers and the simulator: it never needs them (its reductions read Problems)
    assert not {n for n in below_core if n.split(".")[1] in ("plan", "simulate", "portfolio", "heuristics", "exact",
                                                             "hetero")}, below_core
    workers = nx.descendants(g, "hybrid_remat.portfolio.workers")
    assert "hybrid_remat.portfolio.scheduler" not in workers and "hybrid_remat.portfolio.runner" not in workers


#: the longest a module may grow (issue 21: small modules with one job)
MAX_LINES = 600


def test_no_module_over_600_lines():
    long = {str(p.relative_to(ROOT.parent)): n for p in ROOT.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_every_module_imports_first():
    """Each module imports in a fresh ``hybrid_remat`` (the package purged
    from ``sys.modules`` before each): a package ``__init__`` that imports
    back a module half-way through its own import fails here, whatever the
    order the rest of the suite happens to import them in.

    Importing ``a.b.c`` first runs ``a.b``'s import first (all of it), so a
    module that a fresh import of its parent package has already loaded
    imports first exactly as its parent does: it is covered by its parent's
    case (the same code runs in the same order) and not imported again.  The
    names are sorted, so a parent's case comes before its children's.  Each
    source file is compiled to bytecode once (as ``.pyc`` files would have
    it; the module's code still runs afresh in every case)."""
    import subprocess
    import sys

    names = sorted(n for n in import_graph() if not n.endswith("__main__"))
    script = (
        "import importlib, importlib.machinery as mach, sys, warnings\n"
        "warnings.simplefilter('ignore')\n"
        # each source compiled once (what .pyc files do; none are written under PYTHONDONTWRITEBYTECODE)
        "codes, compile_source = {}, mach.SourceFileLoader.source_to_code\n"
        "def source_to_code(self, data, path, **kw):\n"
        "    key = (path, bytes(data))\n"
        "    if key not in codes:\n"
        "        codes[key] = compile_source(self, data, path, **kw)\n"
        "    return codes[key]\n"
        "mach.SourceFileLoader.source_to_code = source_to_code\n"
        "bad, loaded, imported, covered = [], {}, 0, 0\n"
        f"for name in {names!r}:\n"
        "    parent = name.rpartition('.')[0]\n"
        "    if parent in loaded and name in loaded[parent]:\n"
        "        loaded[name] = loaded[parent]\n"
        "        covered += 1\n"
        "        continue\n"
        "    for m in [m for m in sys.modules if m == 'hybrid_remat' or m.startswith('hybrid_remat.')]:\n"
        "        del sys.modules[m]\n"
        "    imported += 1\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ImportError as e:\n"
        "        bad.append(f'{name}: {e}')\n"
        "        continue\n"
        "    loaded[name] = {m for m in sys.modules if m == 'hybrid_remat' or m.startswith('hybrid_remat.')}\n"
        "print(imported, covered)\n"
        "print('\\n'.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT.parent, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    counts, _, bad = out.stdout.partition("\n")
    imported, covered = map(int, counts.split())
    assert imported + covered == len(names) and imported > 10, (imported, covered, len(names))
    assert not bad.strip(), bad
