"""The plugin manager: the one piece of global state in hybrid_remat.

Built-ins (:data:`DEFAULT_PLUGINS`) register first, through the very hooks
of :mod:`hybrid_remat.hookspecs`; then every entry point of the group
``hybrid_remat`` unless the environment variable
``HYBRID_REMAT_DISABLE_PLUGIN_AUTOLOAD`` is set (to anything but ``""`` or
``"0"``).  ``HYBRID_REMAT_BLOCKED_PLUGINS=a,b`` blocks plugins by name.

A plugin that cannot be imported, has a hook with a wrong signature or an
unknown ``hybrid_remat_*`` name, raises from a hook, or registers an object
whose name is already taken is skipped with a :class:`PluginWarning` naming
it; everything else goes on.  The contract is documented in
:mod:`hybrid_remat.hookspecs`; :mod:`hybrid_remat.testing` checks objects
against it.

Examples
--------
>>> from hybrid_remat import plugins
>>> "chen_greedy" in plugins.heuristics()
True
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import re
import warnings
from dataclasses import dataclass
from typing import Any

import pluggy

from . import hookspecs
from .errors import PluginError, PluginWarning

__all__ = [
    "DEFAULT_PLUGINS", "ENTRY_POINT_GROUP", "PluginWarning", "get_plugin_manager", "reset",
    "register", "unregister", "heuristics", "bounds", "improvers", "formulations", "cost_models", "loaders",
    "registered", "Registered", "identity", "problems", "register_path", "DISABLE_ENV", "BLOCK_ENV",
]

ENTRY_POINT_GROUP = "hybrid_remat"
DISABLE_ENV = "HYBRID_REMAT_DISABLE_PLUGIN_AUTOLOAD"
BLOCK_ENV = "HYBRID_REMAT_BLOCKED_PLUGINS"
DEFAULT_PLUGINS = (
    "hybrid_remat.builtin.loaders",
    "hybrid_remat.builtin.heuristics",
    "hybrid_remat.builtin.bounds",
    "hybrid_remat.builtin.improvers",
    "hybrid_remat.builtin.formulations",
    "hybrid_remat.builtin.cost_models",
)  # one module per hook

_KINDS = {
    "heuristics": ("hybrid_remat_register_heuristics", ("run",)),
    "bounds": ("hybrid_remat_register_bounds", ("bound",)),
    "improvers": ("hybrid_remat_register_improvers", ("improve",)),
    "formulations": ("hybrid_remat_register_formulations", ("solve",)),
    "cost_models": ("hybrid_remat_register_cost_models", ("estimate",)),
    "loaders": ("hybrid_remat_register_loaders", ("sniff", "load")),
}


# the hooks of the contract (pluggy itself accepts impls of unknown hooks and
# creates unverified callers for them, so checking pm.hook is not enough)
_HOOK_NAMES = frozenset(a for a in dir(hookspecs) if a.startswith("hybrid_remat_"))


@dataclass(frozen=True)
class Registered:
    """One registered object with its provenance."""

    kind: str
    name: str
    obj: Any
    plugin: str
    source: str  # "builtin", "entrypoint:<dist>", "runtime", "path:<file>"
    dist_version: str = ""

    @property
    def identity(self) -> str:
        return f"{self.plugin}:{self.name}@{getattr(self.obj, 'version', '0')}"

    @property
    def capabilities(self) -> tuple[str, ...]:
        return tuple(sorted(getattr(self.obj, "capabilities", ())))


_state: dict[str, Any] = {"pm": None, "sources": {}, "dist_versions": {}, "cache": None, "warnings": [],
                         "collect_warnings": []}


def _warn(message: str, phase: str = "build") -> None:
    _state["warnings" if phase == "build" else "collect_warnings"].append(message)
    warnings.warn(message, PluginWarning, stacklevel=3)


def problems() -> list[str]:
    """The messages of every :class:`PluginWarning` issued since the
    registry was last built (what ``hybrid-remat plugins`` shows)."""
    get_plugin_manager()
    _collect()
    return list(_state["warnings"]) + list(_state["collect_warnings"])


def _env_on(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


def _safe_register(pm: pluggy.PluginManager, plugin: Any, name: str, source: str) -> bool:
    if pm.get_plugin(name) is not None or name in _state["sources"]:
        prev = _state["sources"].get(name, "?")
        _warn(f"plugin {name!r} ({source}) skipped: the name is already taken by a plugin from {prev}")
        return False
    try:
        pm.register(plugin, name=name)
    except Exception as e:  # pluggy.PluginValidationError, ValueError (duplicate)
        detail = "; ".join(line.strip() for line in str(e).splitlines() if line.strip())
        _warn(f"plugin {name!r} skipped: {detail}")
        return False
    unknown = [
        a for a in dir(plugin)
        if a.startswith("hybrid_remat_") and callable(getattr(plugin, a, None)) and a not in _HOOK_NAMES
    ]
    if unknown:
        pm.unregister(plugin)
        _warn(f"plugin {name!r} skipped: unknown hook(s) {', '.join(unknown)}")
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
    _state["dist_versions"] = {}
    _state["warnings"] = []
    for modname in DEFAULT_PLUGINS:
        _safe_register(pm, importlib.import_module(modname), modname, "builtin")
    blocked = {b.strip() for b in os.environ.get(BLOCK_ENV, "").split(",") if b.strip()}
    for b in blocked:
        pm.set_blocked(b)
    if not _env_on(DISABLE_ENV):
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            if ep.name in blocked:
                continue
            dist = getattr(ep, "dist", None)
            source = f"entrypoint:{dist.name if dist else '?'}"
            if pm.get_plugin(ep.name) is not None or ep.name in _state["sources"]:
                prev = _state["sources"].get(ep.name, "?")
                if prev != source:  # the same distribution seen twice on sys.path is not news
                    _warn(f"plugin {ep.name!r} ({source}) skipped: the name is already taken by a plugin "
                                  f"from {prev}")
                continue
            try:
                plugin = ep.load()
            except Exception as e:
                _warn(f"plugin {ep.name!r} ({source}) skipped: import failed: {e!r}")
                continue
            if _safe_register(pm, plugin, ep.name, source) and dist is not None:
                _state["dist_versions"][ep.name] = str(dist.version)
    return pm


def reset() -> None:
    """Forget the manager (the next use rebuilds it, re-reading the environment)."""
    _state["pm"] = None
    _state["cache"] = None
    _state["sources"] = {}
    _state["dist_versions"] = {}
    _state["warnings"] = []


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


def register_path(path: str | os.PathLike, name: str | None = None) -> str:
    """Import a plugin from a ``.py`` file and register it (datasette's
    ``--plugins-dir`` style); returns its name (default: the file's stem).

    Raises
    ------
    PluginError
        If the file cannot be imported or the plugin cannot be registered.
    """
    path = os.fspath(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    modname = "hybrid_remat_local_" + re.sub(r"\W", "_", stem)
    try:
        spec = importlib.util.spec_from_file_location(modname, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"not a Python file: {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as e:
        raise PluginError(f"plugin file {path}: import failed: {e!r}") from None
    name = name or stem
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ok = _safe_register(get_plugin_manager(), module, name, f"path:{path}")
    if not ok:
        raise PluginError(str(w[-1].message) if w else f"plugin {name!r} could not be registered")
    _state["cache"] = None
    return name


def unregister(name: str) -> None:
    """Remove a plugin registered under ``name``.

    Raises
    ------
    PluginError
        If no plugin has that name.
    """
    pm = get_plugin_manager()
    if pm.get_plugin(name) is None:
        raise PluginError(f"no plugin named {name!r} is registered")
    pm.unregister(name=name)
    _state["sources"].pop(name, None)
    _state["cache"] = None


def _iter_or_none(x: Any) -> list:
    try:
        return list(x)
    except TypeError:
        return [None]


def _collect() -> dict[str, dict[str, Registered]]:
    if _state["cache"] is not None:
        return _state["cache"]
    pm = get_plugin_manager()
    out: dict[str, dict[str, Registered]] = {k: {} for k in _KINDS}
    _state["collect_warnings"] = []
    for kind, (hook, methods) in _KINDS.items():
        caller = getattr(pm.hook, hook)
        for impl in caller.get_hookimpls():  # registration order: built-ins first
            pname = impl.plugin_name
            if impl.hookwrapper or getattr(impl, "wrapper", False):
                _warn(f"plugin {pname!r}: {hook} must not be a wrapper; skipped", "collect")
                continue
            try:
                objs = impl.function()
            except Exception as e:
                _warn(f"plugin {pname!r} skipped for {kind}: {hook} raised {e!r}", "collect")
                continue
            if objs is None:
                continue
            if not isinstance(objs, (list, tuple)):
                _warn(f"plugin {pname!r}: {hook} must return a list, got {type(objs).__name__}", "collect")
                continue
            for obj in objs:
                oname = getattr(obj, "name", None)
                if not isinstance(oname, str) or not oname:
                    _warn(f"plugin {pname!r}: a registered {kind[:-1]} has no name; skipped", "collect")
                    continue
                missing = [m for m in methods if not callable(getattr(obj, m, None))]
                if missing:
                    _warn(f"plugin {pname!r}: {kind[:-1]} {oname!r} lacks {', '.join(missing)}; skipped", "collect")
                    continue
                caps = getattr(obj, "capabilities", ())
                if isinstance(caps, str) or not all(isinstance(c, str) for c in _iter_or_none(caps)):
                    _warn(f"plugin {pname!r}: {kind[:-1]} {oname!r} has capabilities {caps!r}, not a set of "
                          "strings; skipped", "collect")
                    continue
                if kind in _SOLVER_KINDS:
                    _check_capabilities(pname, kind, oname, caps)
                    obj = _adapted(kind, obj, pname)
                if oname in out[kind]:
                    prev = out[kind][oname].plugin
                    _warn(f"plugin {pname!r}: {kind[:-1]} name {oname!r} is already registered by {prev!r}; skipped",
                          "collect")
                    continue
                out[kind][oname] = Registered(kind, oname, obj, pname, _state["sources"].get(pname, "runtime"),
                                              _state["dist_versions"].get(pname, ""))
    _state["cache"] = out
    return out


_SOLVER_KINDS = ("heuristics", "bounds", "improvers", "formulations")


def _adapted(kind: str, obj, pname: str):
    """``obj`` with its kind's one signature: an older one is wrapped here,
    once, with a warning (:func:`hybrid_remat.portfolio.calls.adapt`)."""
    from .portfolio.calls import adapt

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = adapt(kind[:-1], obj, who=pname)
    for w in caught:
        _warn(str(w.message), "collect")
    return out


def _check_capabilities(pname: str, kind: str, oname: str, caps) -> None:
    """Warn about capability strings outside :data:`~hybrid_remat.interfaces.CAPABILITIES`
    (they are ignored)."""
    from .interfaces import CAPABILITIES

    unknown = sorted(set(caps) - set(CAPABILITIES))
    if unknown:
        _warn(f"plugin {pname!r}: {kind[:-1]} {oname!r} declares unknown capabilities {', '.join(unknown)} "
              f"(ignored; known: {', '.join(CAPABILITIES)})", "collect")


def heuristics() -> dict[str, Any]:
    """Registered heuristics by name."""
    return {k: r.obj for k, r in _collect()["heuristics"].items()}


def bounds() -> dict[str, Any]:
    """Registered bound sources by name."""
    return {k: r.obj for k, r in _collect()["bounds"].items()}


def improvers() -> dict[str, Any]:
    """Registered improvers by name."""
    return {k: r.obj for k, r in _collect()["improvers"].items()}


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
    """``plugin:name@version`` of a registered object.

    Raises
    ------
    PluginError
        Unknown kind or name.
    """
    c = _collect()
    if kind not in c or name not in c[kind]:
        known = ", ".join(sorted(c.get(kind, {}))) or "none"
        raise PluginError(f"no {kind} named {name!r} is registered (known: {known})")
    return c[kind][name].identity
