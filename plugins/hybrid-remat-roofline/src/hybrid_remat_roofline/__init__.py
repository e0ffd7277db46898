"""Roofline cost model plugin for hybrid_remat.

Examples
--------
>>> from hybrid_remat_roofline import RooflineModel
>>> from hybrid_remat.generators import chain
>>> RooflineModel().estimate(chain(3, bytes=1 << 20), "h200").shape
(3,)
"""

from .devices import DEVICES, DeviceSpec
from .model import RooflineModel, bytes_moved, is_matrix_op

__version__ = "0.1.0"

__all__ = ["DEVICES", "DeviceSpec", "RooflineModel", "bytes_moved", "is_matrix_op", "__version__"]
