"""The plan classes sit below the planners: nothing in ``heuristics/`` (but
``lp_rounding``, which moves to ``exact/``), ``core/`` or the oracle
imports ``exact/``, and ``core/`` imports no planner."""

from __future__ import annotations

import ast
import pathlib

import pytest

PKG = pathlib.Path(__file__).resolve().parents[1] / "hybrid_remat"
MOVING = {"lp_rounding.py"}  # an exact model's rounding: it moves to exact/ (helper scip)


def _imports(path: pathlib.Path) -> set[str]:
    """Absolute module names a file imports (relative imports resolved)."""
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(parts[:-node.level])
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
    return out


FILES = sorted([p for p in (PKG / "heuristics").glob("*.py") if p.name not in MOVING]
               + list((PKG / "core").glob("*.py")) + [PKG / "oracle.py"])


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(PKG)) for p in FILES])
def test_no_planner_below_imports_the_exact_models(path):
    bad = sorted(m for m in _imports(path) if m == "hybrid_remat.exact" or m.startswith("hybrid_remat.exact."))
    assert not bad, f"{path.name} imports {bad}"
    if path.parent.name == "core":
        up = sorted(m for m in _imports(path) if m.split(".")[:2] in (["hybrid_remat", "heuristics"],
                                                                      ["hybrid_remat", "hetero"]))
        assert not up, f"{path.name} imports {up}"
