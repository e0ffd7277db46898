"""The plan classes sit below the planners: nothing in ``heuristics/``,
``core/`` or the oracle imports ``exact/``, nothing in ``exact/``, ``bounds/`` or ``scip/`` imports
``heuristics/`` (a formulation that wants a heuristic's plan finds it
through the registry), and ``core/`` imports no planner."""

from __future__ import annotations

import ast
import pathlib

import pytest

PKG = pathlib.Path(__file__).resolve().parents[1] / "hybrid_remat"


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


def _under(mod: str, package: str) -> bool:
    return mod == f"hybrid_remat.{package}" or mod.startswith(f"hybrid_remat.{package}.")


BELOW = sorted(list((PKG / "heuristics").rglob("*.py")) + list((PKG / "core").rglob("*.py")) + [PKG / "oracle.py"])
# the exact models, the bounds and the SCIP layer under them
EXACT = sorted(p for d in ("exact", "bounds", "scip") for p in (PKG / d).rglob("*.py"))


@pytest.mark.parametrize("path", BELOW, ids=[str(p.relative_to(PKG)) for p in BELOW])
def test_no_planner_below_imports_the_exact_models(path):
    bad = sorted(m for m in _imports(path) if _under(m, "exact"))
    assert not bad, f"{path.name} imports {bad}"
    if path.parent.name == "core":
        up = sorted(m for m in _imports(path) if _under(m, "heuristics") or _under(m, "hetero"))
        assert not up, f"{path.name} imports {up}"


@pytest.mark.parametrize("path", EXACT, ids=[str(p.relative_to(PKG)) for p in EXACT])
def test_no_exact_model_imports_the_heuristics(path):
    bad = sorted(m for m in _imports(path) if _under(m, "heuristics"))
    assert not bad, f"{path.relative_to(PKG)} imports {bad}"


def test_the_import_reader_sees_relative_imports():
    """The check above can fail: a relative import of the heuristics from exact/ is seen."""
    probe = PKG / "exact" / "checkmate" / "formulation.py"
    assert "hybrid_remat.core.staged" in _imports(probe)
    assert any(_under(m, "heuristics") for m in _imports(PKG / "heuristics" / "dtr.py"))
