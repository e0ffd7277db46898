"""Roofline cost model plugin for hybrid_remat.

Examples
--------
>>> from hybrid_remat_roofline import RooflineModel
>>> from hybrid_remat.generators import chain
>>> RooflineModel().estimate(chain(3, bytes=1 << 20), "h200").shape
(3,)
"""

from .devices import DEVICES, PAIRS, DeviceSpec, HardwarePair
from .model import RooflineModel, apply_pair, bytes_moved, is_matrix_op

__version__ = "0.1.0"

__all__ = ["DEVICES", "PAIRS", "DeviceSpec", "HardwarePair", "RooflineModel", "apply_pair", "bytes_moved",
           "is_matrix_op", "__version__"]
