"""What ``hybrid-remat plugins`` prints: everything registered, from where,
with capabilities.

Examples
--------
>>> from hybrid_remat.plugin_report import format_plugin_table
>>> print(format_plugin_table())          # doctest: +SKIP
kind         name       version  plugin                            source    capabilities
heuristic    keep_all   1        hybrid_remat.builtin.heuristics   builtin   chain,dag,single_device
...
"""

from __future__ import annotations

from . import plugins

__all__ = ["plugin_rows", "format_plugin_table"]

_COLUMNS = ("kind", "name", "version", "plugin", "source", "capabilities")


def plugin_rows() -> list[dict[str, str]]:
    """One dict per registered object: ``kind`` (singular), ``name``,
    ``version``, ``plugin`` (registration name), ``source`` (``builtin``,
    ``entrypoint:<dist> <version>``, ``runtime`` or ``path:<file>``),
    ``capabilities`` (comma-separated) and ``identity``."""
    rows = []
    for r in plugins.registered():
        source = r.source + (f" {r.dist_version}" if r.dist_version else "")
        rows.append({
            "kind": r.kind[:-1],
            "name": r.name,
            "version": str(getattr(r.obj, "version", "0")),
            "plugin": r.plugin,
            "source": source,
            "capabilities": ",".join(r.capabilities) or "-",
            "identity": r.identity,
        })
    return rows


def format_plugin_table() -> str:
    """A plain-text table of :func:`plugin_rows`, followed by the
    :class:`~hybrid_remat.plugins.PluginWarning` messages issued while the
    registry was built (skipped plugins), one a line.

    The autoload switch is reported when it is on, so that an empty
    third-party section is not a mystery.
    """
    rows = plugin_rows()
    widths = {c: max([len(c)] + [len(r[c]) for r in rows]) for c in _COLUMNS}
    lines = ["  ".join(c.ljust(widths[c]) for c in _COLUMNS).rstrip()]
    for r in rows:
        lines.append("  ".join(r[c].ljust(widths[c]) for c in _COLUMNS).rstrip())
    if not rows:
        lines.append("(nothing registered)")
    if plugins._env_on(plugins.DISABLE_ENV):
        lines.append(f"entry-point autoloading is off ({plugins.DISABLE_ENV} is set)")
    for message in plugins.problems():
        lines.append(f"warning: {message}")
    return "\n".join(lines)
