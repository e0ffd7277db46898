"""Device tables for the roofline model.

Sources
-------
``h200``
    NVIDIA H200 SXM product brief: FP32 67 TFLOPS, TF32 tensor core
    989 TFLOPS *with sparsity*, i.e. 494.5 dense; HBM3e 4.8 TB/s.  PyTorch
    runs fp32 convolutions in TF32 (``cudnn.allow_tf32`` defaults on) but
    fp32 matmuls in full FP32 (``matmul.allow_tf32`` defaults off), so
    ``matrix_flops`` applies TF32 to convolutions only
    (``conv_flops``) and FP32 to matmuls.
``a100``
    NVIDIA A100 SXM 80GB datasheet: FP32 19.5 TFLOPS, TF32 156 TFLOPS
    dense, HBM2e 2.039 TB/s.
``ryzen9_7950x``
    AMD Ryzen 9 7950X (16 Zen 4 cores): 2 x 256-bit FMA pipes per core =
    32 FP32 FLOP/cycle x 16 cores x 5.1 GHz boost ~ 2.6 TFLOPS; DDR5-5200
    dual channel 83.2 GB/s.

Launch overheads are not on any spec sheet.  ``h200``'s (20 us) is the
measured time of the smallest operators in the project's profiled graphs
(which time each op between two synchronisations); ``a100`` takes the same;
the desktop CPU's 5 us is PyTorch's typical eager dispatch cost (an
assumption).

``xeon16``
    The 16-thread Xeon the profiled graphs' CPU times come from.  Its
    peak FLOPs, bandwidth and overhead are **fitted** (least squares in log
    time, on five of the eleven profiled graphs) by
    ``benchmarks/roofline_validation.py --fit``; the spec sheet of that
    machine is unknown.
``h200_fit``
    The same fit for the measured H200 times: what the spec-sheet ``h200``
    entry becomes when calibrated (achieved rather than peak rates, and
    the per-op cost of timing one op between two synchronisations).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DeviceSpec", "DEVICES"]


@dataclass(frozen=True)
class DeviceSpec:
    """Roofline constants of one device.

    Attributes
    ----------
    name : str
    vector_flops : float
        FLOP/s of element-wise / reduction work.
    matmul_flops : float
        FLOP/s of matrix products (mm, addmm, bmm, attention).
    conv_flops : float
        FLOP/s of convolutions and their backward.
    bandwidth : float
        Memory bandwidth in bytes/s.
    overhead : float
        Seconds added to every operator (launch / dispatch).
    source : str
        Where the numbers come from (``"spec"`` or ``"fitted"``).
    """

    name: str
    vector_flops: float
    matmul_flops: float
    conv_flops: float
    bandwidth: float
    overhead: float
    source: str


DEVICES: dict[str, DeviceSpec] = {
    "h200": DeviceSpec("h200", 67e12, 67e12, 494.5e12, 4.8e12, 20e-6, "spec (overhead measured)"),
    "a100": DeviceSpec("a100", 19.5e12, 19.5e12, 156e12, 2.039e12, 20e-6, "spec (overhead assumed)"),
    "ryzen9_7950x": DeviceSpec("ryzen9_7950x", 2.6e12, 2.6e12, 2.6e12, 83.2e9, 5e-6, "spec (overhead assumed)"),
    # fitted by benchmarks/roofline_validation.py --fit (see the module docstring)
    "xeon16": DeviceSpec("xeon16", 289e9, 919e9, 919e9, 60.5e9, 38.9e-6, "fitted"),
    "h200_fit": DeviceSpec("h200_fit", 21.8e9, 42.8e12, 42.8e12, 3.43e12, 47.5e-6, "fitted"),
}
