"""Built-in plugins: registered through the same hooks as third parties,
one module per hook (:mod:`hybrid_remat.hookspecs`):

* :mod:`.heuristics` -- ``hybrid_remat_register_heuristics``
* :mod:`.bounds` -- ``hybrid_remat_register_bounds``
* :mod:`.improvers` -- ``hybrid_remat_register_improvers``
* :mod:`.formulations` -- ``hybrid_remat_register_formulations``
* :mod:`.cost_models` -- ``hybrid_remat_register_cost_models``
* :mod:`.loaders` -- ``hybrid_remat_register_loaders``

Each module implements its one hook and nothing else (``tests/test_plugins.py`` checks).
"""
