"""The command line's one argument-checking layer: every subcommand's
arguments are checked here, before any graph is loaded or any solve
starts (``hybrid_remat.cli.main`` calls :func:`check_args` for each
command).  A wrong argument is a :class:`CLIError` (one line, exit 2).

Examples
--------
>>> import argparse
>>> check_args(argparse.Namespace(command="solve", time_limit=float("inf")))
Traceback (most recent call last):
...
hybrid_remat._cli_checks.CLIError: --time-limit must be a finite number of seconds, not inf
"""

from __future__ import annotations

import math
import os

from .errors import HybridRematError

__all__ = ["CLIError", "MAX_TIME_LIMIT", "check_args", "check_seconds", "check_out", "check_budget_spec",
           "check_devices", "check_names", "FIGURE_FORMATS"]

#: the longest ``--time-limit`` accepted (7 days): anything longer is a typo
MAX_TIME_LIMIT = 7 * 24 * 3600.0
#: the figure files ``plot -o`` and ``sweep --plot`` write
FIGURE_FORMATS = (".png", ".svg", ".pdf")


class CLIError(HybridRematError):
    """A usage error: printed as one line, exit code 2."""


def check_seconds(flag: str, value, *, allow_zero: bool = False) -> None:
    """A number of seconds: finite, positive (or 0), at most :data:`MAX_TIME_LIMIT`."""
    if not math.isfinite(value):
        raise CLIError(f"{flag} must be a finite number of seconds, not {value:g}")
    if value < 0 or (value == 0 and not allow_zero):
        raise CLIError(f"{flag} must be a positive number of seconds, not {value:g}")
    if value > MAX_TIME_LIMIT:
        raise CLIError(f"{flag} {value:g} s is more than {MAX_TIME_LIMIT:g} s (7 days): give a shorter limit")


def check_budget_spec(flag: str, spec) -> None:
    """``spec`` is in the budget grammar (:data:`hybrid_remat.budgets.BUDGET_GRAMMAR`)."""
    from .budgets import parse_budget_spec
    from .errors import BudgetError

    try:
        parse_budget_spec(spec)
    except BudgetError as e:
        raise CLIError(f"{flag}: {e}") from None


def check_devices(args, *, need_size: bool = False) -> None:
    """Each ``--device NAME[=SIZE]``: a name, a size in the budget grammar.
    ``--budget`` applies to the devices without a size; with every device
    sized it would be ignored, so it is an error.  ``need_size``: every
    device needs its own size (sweep's extra devices)."""
    devices = getattr(args, "device", None) or []
    for spec in devices:
        name, eq, size = str(spec).partition("=")
        if not name.strip():
            raise CLIError(f"--device {spec!r}: name the device, e.g. gpu=2GiB")
        if eq:
            check_budget_spec(f"--device {spec}", size)
        elif need_size:
            raise CLIError(f"--device {spec!r}: give its size, e.g. {name.strip()}=64GiB")
    if getattr(args, "budget", None) is not None and devices and all("=" in d for d in devices):
        raise CLIError(
            "--budget applies only to a --device given without a size, and every --device has one: "
            "drop --budget, or write e.g. --device gpu --budget 60%"
        )


def check_out(flag: str, path: str | None, force: bool, *, formats: tuple | None = None) -> None:
    """``path`` can be written: its folder exists *as written* (``d/missing/..``
    does not), is writable, the name has one of ``formats``; an existing
    file needs ``--force``."""
    if not path:
        return
    if formats is not None and os.path.splitext(path)[1].lower() not in formats:
        raise CLIError(f"{flag} {path}: cannot tell the figure format; use one of {', '.join(formats)}")
    folder = os.path.dirname(path) or os.curdir
    if os.path.isdir(path):
        raise CLIError(f"{flag} {path} is a directory: name a file, e.g. {os.path.join(path, 'plan.json')}")
    if not os.path.isdir(folder):  # not normalised: the OS resolves d/missing/.. only if d/missing exists
        raise CLIError(f"{flag} {path}: the directory {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise CLIError(f"{flag} {path}: the directory {folder} is not writable")
    if os.path.exists(path) and not force:
        raise CLIError(f"{path} exists; pass --force to overwrite it")


def check_names(args) -> None:
    """Every --heuristic/--formulation/--bound/--improver names something registered."""
    kinds = ("heuristic", "formulation", "bound", "improver")
    if not any(getattr(args, k, None) for k in kinds):
        return
    from . import plugins

    for kind in kinds:
        reg = getattr(plugins, kind + "s")()
        for name in getattr(args, kind, None) or []:
            if name not in reg:
                raise CLIError(f"unknown {kind} {name!r}; registered: {', '.join(sorted(reg)) or 'none'}")


def _check_file(what: str, path: str) -> None:
    if not os.path.exists(path):
        raise CLIError(f"{what} {path}: no such file")
    if os.path.isdir(path):
        raise CLIError(f"{what} {path} is a directory, not a file")
    if not os.access(path, os.R_OK):
        raise CLIError(f"{what} {path}: not readable")


def _check_count(flag: str, value, least: int = 1) -> None:
    if value is not None and value < least:
        raise CLIError(f"{flag} must be at least {least}, not {value}")


def check_args(args) -> None:
    """Check every argument ``args`` has (any subcommand's); raise
    :class:`CLIError` on the first wrong one."""
    if getattr(args, "time_limit", None) is not None:
        check_seconds("--time-limit", args.time_limit)
    if getattr(args, "search_time", None) is not None:
        check_seconds("--search-time", args.search_time, allow_zero=True)
    _check_count("--workers", getattr(args, "workers", None))
    _check_count("--jobs", getattr(args, "jobs", None))
    _check_count("--node-limit", getattr(args, "node_limit", None))
    _check_count("--max-points", getattr(args, "max_points", None), 2)
    seed = getattr(args, "seed", None)
    if seed is not None and not 0 <= seed < 2**31:
        raise CLIError(f"--seed must be an integer in 0..{2**31 - 1}, not {seed}")
    if getattr(args, "budget", None) is not None:
        check_budget_spec("--budget", args.budget)
    if getattr(args, "budgets", None) is not None:
        from .errors import BudgetError
        from .sweep import parse_budgets

        try:
            budgets = parse_budgets(args.budgets)
        except BudgetError as e:
            raise CLIError(f"--budgets: {e}") from None
        for b in budgets:
            check_budget_spec("--budgets", b)
    check_devices(args, need_size=args.command == "sweep")
    check_names(args)
    for attr, what in (("graph", "graph"), ("plan", "plan")):
        if getattr(args, attr, None):
            _check_file(what, getattr(args, attr))
    for path in getattr(args, "graphs", None) or []:
        _check_file("graph", path)
    force = bool(getattr(args, "force", False))
    if args.command == "plot":
        check_out("--out", args.out, force, formats=FIGURE_FORMATS)
    elif getattr(args, "out", None):
        check_out("--out", args.out, force)
    if getattr(args, "plot", None):
        check_out("--plot", args.plot, force, formats=FIGURE_FORMATS)
