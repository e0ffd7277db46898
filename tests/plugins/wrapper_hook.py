"""A registration hook declared as a wrapper (not allowed: they are collecting hooks)."""

from hybrid_remat import hookimpl


@hookimpl(wrapper=True)
def hybrid_remat_register_heuristics():
    result = yield
    return result
