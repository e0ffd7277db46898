"""The key/value cache arguments of Hugging Face style forwards, and the
``use_cache`` switch: a training step reads no cache, and a checkpointed
call's replay must not read a cache its forward appended to.  Used by the
checkpoint runtime (:mod:`._regions`), the replay probe (:mod:`._probe`) and
every door that runs a training step.

Examples
--------
>>> without_cache((1, "kv"), {"use_cache": True}, positions=(1,))
((1, None), {'use_cache': False})
"""

from __future__ import annotations

__all__ = ["CACHE_KWARGS", "training_kwargs", "cache_positions", "without_cache"]

#: Keyword arguments through which Hugging Face layers receive (and update) a
#: key/value cache; a checkpointed call gets ``None`` / ``False`` instead, as
#: transformers' own gradient checkpointing does (a training step reads no cache).
CACHE_KWARGS = ("past_key_values", "past_key_value", "layer_past", "cache")


def training_kwargs(model, kwargs: dict) -> dict:
    """``kwargs`` with ``use_cache=False`` for a model in training whose
    forward takes ``use_cache`` (Hugging Face) and was not given it: a
    training step's loss reads no key/value cache, and building one costs
    time and memory (transformers' own checkpointing switches it off too)."""
    import inspect

    if not getattr(model, "training", False) or "use_cache" in kwargs:
        return kwargs
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return kwargs
    return {**kwargs, "use_cache": False} if "use_cache" in params else kwargs


def cache_positions(fn) -> tuple:
    """Positions of ``fn``'s parameters named in :data:`CACHE_KWARGS`
    (Hugging Face blocks take the cache positionally)."""
    import inspect

    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return ()
    return tuple(i for i, p in enumerate(params)
                 if p.name in CACHE_KWARGS and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def without_cache(args: tuple, kwargs: dict, positions: tuple = ()) -> tuple:
    """``(args, kwargs)`` with any key/value cache (at ``positions`` or by
    name) ``None`` and ``use_cache`` off, as transformers' own gradient
    checkpointing passes them: a replay must not read a cache its forward
    appended to."""
    if any(i < len(args) and args[i] is not None for i in positions):
        args = tuple(None if i in positions else a for i, a in enumerate(args))
    if kwargs and any(k in kwargs for k in (*CACHE_KWARGS, "use_cache")):
        kwargs = dict(kwargs)
        for k in CACHE_KWARGS:
            if kwargs.get(k) is not None:
                kwargs[k] = None
        if kwargs.get("use_cache"):
            kwargs["use_cache"] = False
    return args, kwargs
