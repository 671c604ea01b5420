"""GPU catalog: datasheet peaks, memory and links per GPU type.

Conventions: TFLOP/s are dense tensor-core peaks (NVIDIA quotes "with sparsity" figures at 2x);
link bandwidths are per GPU and ONE direction (NVIDIA quotes NVLink as a bidirectional total, so
900 GB/s NVLink4 = 450 GB/s each way). ``gemm_efficiency`` is the fraction of peak that large,
well-shaped BF16 GEMMs achieve in practice; it is the one non-datasheet number per GPU and is
documented with its source.

Built-in per-GPU defaults (``costmodel.gpu_defaults``) refine it from published micro-benchmarks:
the effective large-GEMM efficiency is ``gemm_efficiency x gemm_efficiency_scale``, the scale
fitted (``costmodel.calibration.defaults``) so that it equals the measured best-shape ceiling
(stas00's MAMF: a short burst at boost clocks) / peak x the sustained-clock factor 0.92 that the
A100 comment below derives (training holds clocks at the power limit). MAMF x 0.92 / peak is
0.80 for A100, 0.739 for H100 and 0.714 for B200 (the entries below, which the fit leaves), 0.671
for GB200 (scale 0.931) and 0.470 for MI300X (0.980).
"""

from costmodel.specs.cluster import GpuSpec, NodeGroup

GIB = 1024**3

CATALOG: dict[str, GpuSpec] = {
    # NVIDIA Tesla V100 SXM2 datasheet: 125 TF FP16 tensor, 15.7 TF FP32, 32 GB HBM2 at 900 GB/s,
    # NVLink2 300 GB/s total (150 each way). No BF16/TF32 tensor cores. DGX-2: 8x100 Gb/s EDR
    # for 16 GPUs = 6.25 GB/s per GPU. GEMM efficiency: cuBLAS FP16 reaches ~100 of 125 TF.
    "V100-32GB": GpuSpec(
        name="V100-32GB",
        bf16_tflops=0.0,
        fp16_tflops=125.0,
        fp32_tflops=15.7,
        tf32_tflops=0.0,
        hbm_gib=32,
        hbm_GBps=900,
        intra_node_GBps=150,
        inter_node_GBps=6.25,
        gemm_efficiency=0.80,
    ),
    # NVIDIA A100 datasheet (r4): 312 TF BF16/FP16 dense, 156 TF TF32, 19.5 TF FP32, 40 GB HBM2 at
    # 1,555 GB/s; NVLink3 600 GB/s total (300 each way). DGX A100: one 200 Gb/s HDR HCA per GPU.
    # GEMM efficiency: large BF16 cuBLAS GEMMs reach ~270-280 TF (~0.88) in short runs; under
    # sustained training load the 400 W cap holds clocks near 1.3 of 1.41 GHz boost (~0.92x),
    # so we take 0.88 * 0.92 ~= 0.80.
    "A100-40GB": GpuSpec(
        name="A100-40GB",
        bf16_tflops=312.0,
        fp16_tflops=312.0,
        tf32_tflops=156.0,
        fp32_tflops=19.5,
        hbm_gib=40,
        hbm_GBps=1555,
        intra_node_GBps=300,
        inter_node_GBps=25,
        gemm_efficiency=0.80,
    ),
    # A100 80GB datasheet: as 40GB but 80 GB HBM2e at 2,039 GB/s.
    "A100-80GB": GpuSpec(
        name="A100-80GB",
        bf16_tflops=312.0,
        fp16_tflops=312.0,
        tf32_tflops=156.0,
        fp32_tflops=19.5,
        hbm_gib=80,
        hbm_GBps=2039,
        intra_node_GBps=300,
        inter_node_GBps=25,
        gemm_efficiency=0.80,
    ),
    # NVIDIA H100 SXM5 datasheet: 989.4 TF BF16 dense, 1,978.9 FP8, 494.7 TF32, 66.9 FP32; 80 GB
    # HBM3 at 3,350 GB/s; NVLink4 900 GB/s total. DGX H100: one 400 Gb/s NDR HCA per GPU.
    # GEMM efficiency: H100 SXM sustains ~700-750 TF on large BF16 GEMMs under its 700 W limit
    # (clock throttling), ~0.74 of the boost-clock peak.
    "H100-80GB": GpuSpec(
        name="H100-80GB",
        bf16_tflops=989.4,
        fp16_tflops=989.4,
        fp8_tflops=1978.9,
        tf32_tflops=494.7,
        fp32_tflops=66.9,
        hbm_gib=80,
        hbm_GBps=3350,
        intra_node_GBps=450,
        inter_node_GBps=50,
        gemm_efficiency=0.74,
    ),
    # NVIDIA H200 SXM datasheet: same Hopper die and peaks as H100 SXM; 141 GB HBM3e at
    # 4,800 GB/s; NVLink 900 GB/s total; 400 Gb/s per GPU in HGX H200 systems.
    "H200-141GB": GpuSpec(
        name="H200-141GB",
        bf16_tflops=989.4,
        fp16_tflops=989.4,
        fp8_tflops=1978.9,
        tf32_tflops=494.7,
        fp32_tflops=66.9,
        hbm_gib=141,
        hbm_GBps=4800,
        intra_node_GBps=450,
        inter_node_GBps=50,
        gemm_efficiency=0.74,
    ),
    # NVIDIA HGX B200 (1,000 W) datasheet: 2,250 TF BF16 dense, 4,500 FP8 dense, 1,100 TF32,
    # 75 FP32; 180 GB HBM3e at 8,000 GB/s; NVLink5 1,800 GB/s total. 400 Gb/s ConnectX-7 per GPU.
    # GEMM efficiency: assumed as Hopper (power-limited clocks), 0.72.
    "B200": GpuSpec(
        name="B200",
        bf16_tflops=2250.0,
        fp16_tflops=2250.0,
        fp8_tflops=4500.0,
        tf32_tflops=1100.0,
        fp32_tflops=75.0,
        hbm_gib=180,
        hbm_GBps=8000,
        intra_node_GBps=900,
        inter_node_GBps=50,
        gemm_efficiency=0.72,
    ),
    # NVIDIA GB200 NVL72 datasheet (per GPU, 1,200 W): 2,500 TF BF16 dense, 5,000 FP8 dense,
    # 1,250 TF32, 80 FP32; 186 GB HBM3e at 8,000 GB/s; 72 GPUs in one NVLink5 domain
    # (1,800 GB/s total per GPU). 400 Gb/s scale-out per GPU.
    "GB200": GpuSpec(
        name="GB200",
        bf16_tflops=2500.0,
        fp16_tflops=2500.0,
        fp8_tflops=5000.0,
        tf32_tflops=1250.0,
        fp32_tflops=80.0,
        hbm_gib=186,
        hbm_GBps=8000,
        intra_node_GBps=900,
        inter_node_GBps=50,
        gemm_efficiency=0.72,
        nvlink_domain_gpus=72,
    ),
    # AMD Instinct MI300X datasheet: 1,307.4 TF BF16 dense, 2,614.9 FP8 dense, 653.7 TF32,
    # 163.4 FP32; 192 GB HBM3 at 5,300 GB/s; 7 Infinity Fabric links, 896 GB/s total
    # (448 each way). 400 Gb/s per GPU scale-out. GEMM efficiency: public BF16 GEMM benchmarks
    # (SemiAnalysis, Dec 2024) show ~600-650 TF sustained, ~0.48 of peak.
    "MI300X": GpuSpec(
        name="MI300X",
        bf16_tflops=1307.4,
        fp16_tflops=1307.4,
        fp8_tflops=2614.9,
        tf32_tflops=653.7,
        fp32_tflops=163.4,
        hbm_gib=192,
        hbm_GBps=5300,
        intra_node_GBps=448,
        inter_node_GBps=50,
        gemm_efficiency=0.48,
    ),
    # NVIDIA L40S datasheet: 362.05 TF BF16 dense (733 sparse), 733 FP8 dense, 183 TF32,
    # 91.6 FP32; 48 GB GDDR6 at 864 GB/s; no NVLink: PCIe Gen4 x16 = 32 GB/s each way.
    # 200 Gb/s per GPU typical scale-out. GEMM efficiency assumed 0.75 (Ada, 350 W).
    "L40S": GpuSpec(
        name="L40S",
        bf16_tflops=362.05,
        fp16_tflops=362.05,
        fp8_tflops=733.0,
        tf32_tflops=183.0,
        fp32_tflops=91.6,
        hbm_gib=48,
        hbm_GBps=864,
        intra_node_GBps=32,
        inter_node_GBps=25,
        gemm_efficiency=0.75,
    ),
}

# A GPU spec without an efficiency figure (an inline custom GPU) gets this fraction of peak:
# the upper end of the range above (Hopper 0.74 .. Ampere 0.80).
DEFAULT_GEMM_EFFICIENCY = 0.80
# Inline GPU specs without link figures get a PCIe Gen4 x16 node (32 GB/s each way) and a
# 100 Gb/s NIC per GPU: conservative, so an unknown GPU never looks faster than it is.
DEFAULT_INTRA_NODE_GBPS = 32.0
DEFAULT_INTER_NODE_GBPS = 12.5


class UnknownGpuError(ValueError):
    """A GPU name that is not in the catalog."""

    pass


def lookup_gpu(name: str) -> GpuSpec:
    """Return the catalog entry for ``name`` (case-insensitive) or raise listing the choices."""
    for key, spec in CATALOG.items():
        if key.lower() == name.lower():
            return spec
    raise UnknownGpuError(f"unknown GPU '{name}'; catalog has: {', '.join(CATALOG)}")


def resolve_gpu(gpu: str | GpuSpec) -> GpuSpec:
    """A catalog GPU by name, or the given ``GpuSpec`` itself."""
    return lookup_gpu(gpu) if isinstance(gpu, str) else gpu


def peak_tflops(gpu: GpuSpec, precision: str) -> float:
    """Dense peak for the GEMM datatype a precision implies (0 if the GPU lacks it)."""
    bf16 = gpu.bf16_tflops
    table = {
        "bf16": bf16,
        "fp16": gpu.fp16_tflops if gpu.fp16_tflops is not None else bf16,
        # FP8 GEMMs (Transformer Engine); without an FP8 figure the GEMMs fall back to BF16.
        "fp8": gpu.fp8_tflops if gpu.fp8_tflops else bf16,
        "tf32": gpu.tf32_tflops if gpu.tf32_tflops else (gpu.fp32_tflops or 0.0),
        # Plain FP32 runs on CUDA cores (PyTorch keeps allow_tf32 off for matmuls by default).
        "fp32": gpu.fp32_tflops or 0.0,
    }
    return table[precision]


# The training precisions (costmodel.specs.training.Precision), in the order hints list them.
PRECISIONS = ("bf16", "fp16", "fp8", "tf32", "fp32")


def attention_precision(precision: str) -> str:
    """Datatype of the attention GEMMs: FP8 training keeps attention in BF16 (Transformer
    Engine's FP8 recipes cast only the linear layers)."""
    return {"fp8": "bf16"}.get(precision, precision)


def precision_gap(gpu: GpuSpec, precision: str) -> str | None:
    """Why ``gpu`` cannot time training in ``precision`` (None when it can).

    A plan is timed with three peaks: its GEMMs' datatype, attention's (BF16 under FP8) and the
    peak MFU is quoted against (BF16 under FP8); a zero in any of them would make a time
    infinite or NaN, so such a plan is refused with this reason instead of priced.
    """
    if precision_usable(gpu, precision):
        return None
    kinds = dict.fromkeys((precision, attention_precision(precision)))
    missing = " and ".join(kind.upper() for kind in kinds if peak_tflops(gpu, kind) <= 0)
    usable = [kind for kind in PRECISIONS if precision_usable(gpu, kind)]
    listed = ", ".join(usable[:-1]) + " or " + usable[-1] if len(usable) > 1 else "".join(usable)
    hint = f"; use {listed} precision" if usable else ""
    return f"{gpu.name} has no {missing} tensor throughput{hint}"


def precision_usable(gpu: GpuSpec, precision: str) -> bool:
    """Whether every peak a ``precision`` plan is timed with is positive (``precision_gap``)."""
    return all(peak_tflops(gpu, kind) > 0 for kind in (precision, attention_precision(precision)))


def group_links_GBps(group: NodeGroup) -> tuple[float, float]:
    """(intra-node, inter-node) bandwidth per GPU, one direction: group override > GPU > default."""
    gpu = resolve_gpu(group.gpu)
    intra = group.intra_node_GBps or gpu.intra_node_GBps or DEFAULT_INTRA_NODE_GBPS
    inter = group.inter_node_GBps or gpu.inter_node_GBps or DEFAULT_INTER_NODE_GBPS
    return intra, inter
