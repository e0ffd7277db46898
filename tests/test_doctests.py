"""The examples in the docstrings run and give what they show."""

import doctest
import importlib
import pkgutil

import pytest

import hybrid_remat
from hybrid_remat.errors import HybridRematError

MODULES = sorted(m.name for m in pkgutil.walk_packages(hybrid_remat.__path__, "hybrid_remat."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    try:
        mod = importlib.import_module(name)
    except (ImportError, HybridRematError) as e:  # optional extras (torch)
        pytest.skip(f"{name}: {e}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
