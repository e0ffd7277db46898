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

Hardware where the CPU matters
------------------------------
XEngine's gains over the best single device (up to 22.5 %, on Intel
"IrisXe" and "Gen9" GPUs with their host CPUs) come from a GPU that is not
far faster than the CPU.  These entries cover that class; peak rates are
derived from the vendors' published figures as ``units x FLOP/clock x
clock`` (the derivation is in each entry's ``source``):

``rtx3060``
    NVIDIA GeForce RTX 3060 12 GB (consumer GPU on PCIe 4.0 x16; NVIDIA's
    product page, https://www.nvidia.com/en-us/geforce/graphics-cards/30-series/rtx-3060-3060ti/):
    3584 CUDA cores at 1.78 GHz boost = 12.7 TFLOPS FP32; 192-bit GDDR6 at
    15 Gbps = 360 GB/s.  GA106's dense TF32 tensor rate is about its FP32
    rate (NVIDIA Ampere GA102 whitepaper: GeForce TF32 = FP32 per SM and
    clock), so convolutions get 12.7 TFLOPS too.
``iris_xe``
    Intel Iris Xe Graphics G7 96 EU in the Core i7-1185G7 (integrated,
    shares the CPU's memory; Intel ARK, https://ark.intel.com/content/www/us/en/ark/products/208664/):
    96 EUs x 16 FP32 FLOP/clock (8 ALUs with FMA) x 1.35 GHz max dynamic
    frequency = 2.07 TFLOPS; LPDDR4x-4266 on 128 bits = 68.3 GB/s (shared).
``i7_1185g7``
    Its host CPU: 4 Willow Cove cores x 32 FP32 FLOP/clock (one 512-bit FMA
    port) x 4.3 GHz all-core turbo = 550 GFLOPS; the same 68.3 GB/s.
``uhd630``
    Intel UHD Graphics 630 (Gen9.5 GT2) in the Core i9-9900K (integrated;
    Intel ARK, https://ark.intel.com/content/www/us/en/ark/products/186605/):
    24 EUs x 16 FP32 FLOP/clock x 1.20 GHz max dynamic frequency = 461
    GFLOPS; DDR4-2666 dual channel, 41.6 GB/s (ARK's "max memory
    bandwidth", shared).
``i9_9900k``
    Its host CPU: 8 Coffee Lake cores x 32 FP32 FLOP/clock (two 256-bit FMA
    ports) x 4.7 GHz all-core turbo = 1.20 TFLOPS; the same 41.6 GB/s.

Launch overheads of these are assumptions (10 us for a GPU kernel launch
through PyTorch eager or oneDNN, 5 us CPU dispatch), not measured.

:data:`PAIRS` combines a GPU and a CPU entry with the link between them:
PCIe 4.0 x16 (31.5 GB/s per direction on paper; 25 GB/s and 10 us are
taken as achieved, an assumption) for the discrete card, and for the
integrated GPUs a copy through the shared DRAM (a read and a write: half
the memory bandwidth, 2 us latency, an assumption).  ``h200_xeon`` is the
measured pair of the profiled graphs (their ``gpu``/``cpu`` cost columns
and ``transfer`` record), listed for completeness.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DeviceSpec", "DEVICES", "HardwarePair", "PAIRS"]


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
    # hardware where the CPU matters (see "Hardware where the CPU matters" above)
    "rtx3060": DeviceSpec("rtx3060", 12.7e12, 12.7e12, 12.7e12, 360e9, 10e-6,
                          "spec: 3584 cores x 2 x 1.78 GHz; 192 bit x 15 Gbps (overhead assumed)"),
    "iris_xe": DeviceSpec("iris_xe", 2.07e12, 2.07e12, 2.07e12, 68.3e9, 10e-6,
                          "spec: 96 EU x 16 x 1.35 GHz; LPDDR4x-4266 x 128 bit, shared (overhead assumed)"),
    "i7_1185g7": DeviceSpec("i7_1185g7", 550e9, 550e9, 550e9, 68.3e9, 5e-6,
                            "spec: 4 cores x 32 x 4.3 GHz; LPDDR4x-4266 x 128 bit, shared (overhead assumed)"),
    "uhd630": DeviceSpec("uhd630", 461e9, 461e9, 461e9, 41.6e9, 10e-6,
                         "spec: 24 EU x 16 x 1.2 GHz; DDR4-2666 dual channel, shared (overhead assumed)"),
    "i9_9900k": DeviceSpec("i9_9900k", 1.20e12, 1.20e12, 1.20e12, 41.6e9, 5e-6,
                           "spec: 8 cores x 32 x 4.7 GHz; DDR4-2666 dual channel, shared (overhead assumed)"),
}


@dataclass(frozen=True)
class HardwarePair:
    """A GPU and a CPU with the link between them.

    Attributes
    ----------
    name : str
    gpu, cpu : str
        Device table entries (:data:`DEVICES`); ``None`` for the measured
        pair (the graph's own ``gpu``/``cpu`` cost columns).
    bandwidth : float
        Copy bandwidth in bytes/s, each direction (``None``: the graph's
        ``transfer`` record).
    latency : float
        Seconds per copy.
    link : str
        ``"pcie"``, ``"shared"`` (integrated GPU: copies go through the
        common DRAM) or ``"measured"``.
    xengine_class : str
        The XEngine platform it stands in for ("IrisXe", "Gen9") or ``""``.
    """

    name: str
    gpu: str | None
    cpu: str | None
    bandwidth: float | None
    latency: float
    link: str
    xengine_class: str = ""


PAIRS: dict[str, HardwarePair] = {
    "h200_xeon": HardwarePair("h200_xeon", None, None, None, 0.0, "measured"),
    "rtx3060_7950x": HardwarePair("rtx3060_7950x", "rtx3060", "ryzen9_7950x", 25e9, 10e-6, "pcie"),
    "irisxe_1185g7": HardwarePair("irisxe_1185g7", "iris_xe", "i7_1185g7", 68.3e9 / 2, 2e-6, "shared", "IrisXe"),
    "uhd630_9900k": HardwarePair("uhd630_9900k", "uhd630", "i9_9900k", 41.6e9 / 2, 2e-6, "shared", "Gen9"),
}
