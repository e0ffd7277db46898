"""Ray, an optional dependency (extra ``[ray]``): the import with a clear
error and the start of a runtime, shared by the sweep
(:mod:`hybrid_remat._sweep_run`) and the segment menus
(:mod:`hybrid_remat.segments.menu_exec`).

Examples
--------
>>> import sys
>>> saved = sys.modules.get("ray")
>>> sys.modules["ray"] = None                  # as where Ray is not installed
>>> try:
...     import_ray()
... except Exception as e:
...     print(e)
Ray is not installed: pip install 'hybrid_remat[ray]'
>>> if saved is None: del sys.modules["ray"]
... else: sys.modules["ray"] = saved
"""

from __future__ import annotations

import os

from .errors import HybridRematError

__all__ = ["import_ray", "start_ray"]


def import_ray():
    """The ``ray`` module, or a :class:`~hybrid_remat.errors.HybridRematError`
    that says how to install it."""
    try:
        import ray
    except ImportError:
        raise HybridRematError("Ray is not installed: pip install 'hybrid_remat[ray]'") from None
    return ray


def start_ray(address=True, num_cpus: int | None = None) -> bool:
    """Initialise Ray unless it is already: ``address=True`` (or ``"local"``)
    starts a local runtime of ``num_cpus`` CPUs (default: the machine's)
    whose workers import the same hybrid_remat as this process (a source
    checkout too); a string connects to that cluster (``"auto"``,
    ``"ray://host:10001"``).  Returns whether it started one (the caller
    shuts down what it started)."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    kwargs = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if isinstance(address, str) and address not in ("", "local"):
        kwargs["address"] = address
    else:
        kwargs["num_cpus"] = num_cpus or os.cpu_count() or 1
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = {"PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH", "")]))}
        from . import plugins

        if os.environ.get(plugins.DISABLE_ENV):
            env[plugins.DISABLE_ENV] = os.environ[plugins.DISABLE_ENV]
        kwargs["runtime_env"] = {"env_vars": env}
    ray.init(**kwargs)
    return True
