"""The plugin manager: the one piece of global state in hybrid_remat.

Built-ins (:data:`DEFAULT_PLUGINS`) register first, through the very hooks
of :mod:`hybrid_remat.hookspecs`; then every entry point of the group
``hybrid_remat`` unless the environment variable
``HYBRID_REMAT_DISABLE_PLUGIN_AUTOLOAD`` is set (to anything but ``""`` or
``"0"``).  ``HYBRID_REMAT_BLOCKED_PLUGINS=a,b`` blocks plugins by name.

A plugin that cannot be imported, has a hook with a wrong signature or an
unknown ``hybrid_remat_*`` name, raises from a hook, or registers an object
whose name is already taken is skipped with a :class:`PluginWarning` naming
it; everything else goes on.

Examples
--------
>>> from hybrid_remat import plugins
>>> "chen_greedy" in plugins.heuristics()
True
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import warnings
from dataclasses import dataclass
from typing import Any

import pluggy

from . import hookspecs
from .errors import PluginError

__all__ = [
    "DEFAULT_PLUGINS", "ENTRY_POINT_GROUP", "PluginWarning", "get_plugin_manager", "reset",
    "register", "unregister", "heuristics", "formulations", "cost_models", "loaders",
    "registered", "Registered",
]

ENTRY_POINT_GROUP = "hybrid_remat"
DISABLE_ENV = "HYBRID_REMAT_DISABLE_PLUGIN_AUTOLOAD"
BLOCK_ENV = "HYBRID_REMAT_BLOCKED_PLUGINS"
DEFAULT_PLUGINS = (
    "hybrid_remat.builtin.loaders",
    "hybrid_remat.builtin.heuristics",
    "hybrid_remat.builtin.formulations",
    "hybrid_remat.builtin.cost_models",
    "hybrid_remat.builtin.hetero",
)

_KINDS = {
    "heuristics": ("hybrid_remat_register_heuristics", ("run",)),
    "formulations": ("hybrid_remat_register_formulations", ("solve",)),
    "cost_models": ("hybrid_remat_register_cost_models", ("estimate",)),
    "loaders": ("hybrid_remat_register_loaders", ("sniff", "load")),
}


class PluginWarning(UserWarning):
    """A plugin was skipped or partly skipped; the message names it."""


@dataclass(frozen=True)
class Registered:
    """One registered object with its provenance."""

    kind: str
    name: str
    obj: Any
    plugin: str
    source: str  # "builtin", "entrypoint:<dist>", "runtime"

    @property
    def identity(self) -> str:
        return f"{self.plugin}:{self.name}@{getattr(self.obj, 'version', '0')}"

    @property
    def capabilities(self) -> tuple[str, ...]:
        return tuple(sorted(getattr(self.obj, "capabilities", ())))


_state: dict[str, Any] = {"pm": None, "sources": {}, "cache": None}


def _env_on(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


def _safe_register(pm: pluggy.PluginManager, plugin: Any, name: str, source: str) -> bool:
    try:
        pm.register(plugin, name=name)
    except Exception as e:  # pluggy.PluginValidationError, ValueError (duplicate)
        warnings.warn(f"plugin {name!r} skipped: {e}", PluginWarning, stacklevel=3)
        return False
    unknown = [
        a for a in dir(plugin)
        if a.startswith("hybrid_remat_") and callable(getattr(plugin, a, None)) and not hasattr(pm.hook, a)
    ]
    if unknown:
        pm.unregister(plugin)
        warnings.warn(f"plugin {name!r} skipped: unknown hook(s) {', '.join(unknown)}", PluginWarning, stacklevel=3)
        return False
    _state["sources"][name] = source
    return True


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager, built on first use."""
    if _state["pm"] is not None:
        return _state["pm"]
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    _state["pm"] = pm
    _state["sources"] = {}
    for modname in DEFAULT_PLUGINS:
        _safe_register(pm, importlib.import_module(modname), modname, "builtin")
    blocked = {b.strip() for b in os.environ.get(BLOCK_ENV, "").split(",") if b.strip()}
    for b in blocked:
        pm.set_blocked(b)
    if not _env_on(DISABLE_ENV):
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            if ep.name in blocked or pm.get_plugin(ep.name) is not None:
                continue
            try:
                plugin = ep.load()
            except Exception as e:
                warnings.warn(f"plugin {ep.name!r} skipped: import failed: {e}", PluginWarning, stacklevel=2)
                continue
            dist = getattr(ep, "dist", None)
            _safe_register(pm, plugin, ep.name, f"entrypoint:{dist.name if dist else '?'}")
    return pm


def reset() -> None:
    """Forget the manager (the next use rebuilds it, re-reading the environment)."""
    _state["pm"] = None
    _state["cache"] = None
    _state["sources"] = {}


def register(plugin: Any, name: str | None = None) -> str:
    """Register a plugin object or module at run time; returns its name.

    Raises
    ------
    PluginError
        If it could not be registered (the message says why).
    """
    pm = get_plugin_manager()
    name = name or getattr(plugin, "__name__", None) or f"runtime-{id(plugin)}"
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ok = _safe_register(pm, plugin, name, "runtime")
    if not ok:
        raise PluginError(str(w[-1].message) if w else f"plugin {name!r} could not be registered")
    _state["cache"] = None
    return name


def unregister(name: str) -> None:
    """Remove a plugin registered under ``name``."""
    pm = get_plugin_manager()
    pm.unregister(name=name)
    _state["sources"].pop(name, None)
    _state["cache"] = None


def _collect() -> dict[str, dict[str, Registered]]:
    if _state["cache"] is not None:
        return _state["cache"]
    pm = get_plugin_manager()
    out: dict[str, dict[str, Registered]] = {k: {} for k in _KINDS}
    for kind, (hook, methods) in _KINDS.items():
        caller = getattr(pm.hook, hook)
        for impl in caller.get_hookimpls():  # registration order: built-ins first
            pname = impl.plugin_name
            try:
                objs = impl.function()
            except Exception as e:
                warnings.warn(f"plugin {pname!r} skipped for {kind}: {hook} raised {e!r}", PluginWarning, stacklevel=2)
                continue
            if objs is None:
                continue
            if not isinstance(objs, (list, tuple)):
                warnings.warn(f"plugin {pname!r}: {hook} must return a list, got {type(objs).__name__}", PluginWarning, stacklevel=2)
                continue
            for obj in objs:
                oname = getattr(obj, "name", None)
                if not isinstance(oname, str) or not oname:
                    warnings.warn(f"plugin {pname!r}: a registered {kind[:-1]} has no name; skipped", PluginWarning, stacklevel=2)
                    continue
                missing = [m for m in methods if not callable(getattr(obj, m, None))]
                if missing:
                    warnings.warn(f"plugin {pname!r}: {kind[:-1]} {oname!r} lacks {', '.join(missing)}; skipped", PluginWarning, stacklevel=2)
                    continue
                if oname in out[kind]:
                    prev = out[kind][oname].plugin
                    warnings.warn(
                        f"plugin {pname!r}: {kind[:-1]} name {oname!r} is already registered by {prev!r}; skipped",
                        PluginWarning, stacklevel=2,
                    )
                    continue
                out[kind][oname] = Registered(kind, oname, obj, pname, _state["sources"].get(pname, "runtime"))
    _state["cache"] = out
    return out


def heuristics() -> dict[str, Any]:
    """Registered heuristics by name."""
    return {k: r.obj for k, r in _collect()["heuristics"].items()}


def formulations() -> dict[str, Any]:
    """Registered formulations by name."""
    return {k: r.obj for k, r in _collect()["formulations"].items()}


def cost_models() -> dict[str, Any]:
    """Registered cost models by name."""
    return {k: r.obj for k, r in _collect()["cost_models"].items()}


def loaders() -> dict[str, Any]:
    """Registered loaders by name (registration order)."""
    return {k: r.obj for k, r in _collect()["loaders"].items()}


def registered() -> list[Registered]:
    """Everything registered, with provenance (for ``hybrid-remat plugins``)."""
    c = _collect()
    return [r for kind in _KINDS for r in c[kind].values()]


def identity(kind: str, name: str) -> str:
    """``plugin:name@version`` of a registered object."""
    return _collect()[kind][name].identity
