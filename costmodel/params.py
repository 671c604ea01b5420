"""Efficiency parameters: the cost model's non-datasheet numbers, in one place.

These are what calibration fits (``costmodel.calibration``); uncalibrated estimates use the
documented defaults below. Everything else in the model is either a datasheet figure (see
``hardware.py``) or a formula with a cited source. See README.md, 'How the cost model works'
and 'Defaults from hardware measurements'.
"""

from pydantic import BaseModel, ConfigDict, Field


class EfficiencyParams(BaseModel):
    """Every non-datasheet number the cost model uses (README, 'How the cost model works':
    efficiency parameters); frozen, what calibration fits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def gemm_dtype_scale(self, precision: str) -> float:
        """This datatype's GEMM efficiency relative to the 16-bit one."""
        if precision == "fp8":
            return self.gemm_fp8_scale
        if precision in ("fp32", "tf32"):
            return self.gemm_fp32_scale
        return 1.0

    gemm_efficiency_scale: float = Field(
        default=1.0,
        gt=0,
        le=2,
        description="Multiplies each GPU's catalog gemm_efficiency (calibration knob).",
    )
    # Per-datatype GEMM efficiency against the 16-bit one (BF16/FP16, which the catalog's
    # gemm_efficiency describes). Datasheet peaks double from 16 to 8 bits, achieved FP8
    # throughput less so (per-tensor scaling, casts, and the same memory traffic), and FP32/TF32
    # GEMMs sit on other units with their own efficiency; 1.0 (uncalibrated) prices every
    # datatype at the 16-bit efficiency, and calibration fits these from GEMMs of that datatype.
    gemm_fp8_scale: float = Field(
        default=1.0, gt=0, le=10, description="FP8 GEMM efficiency / the 16-bit GEMM efficiency."
    )
    gemm_fp32_scale: float = Field(
        default=1.0,
        gt=0,
        le=10,
        description="FP32 and TF32 GEMM efficiency / the 16-bit GEMM efficiency.",
    )
    gemm_half_dim: float = Field(
        default=256.0,
        ge=0,
        le=100_000,
        description=(
            "GEMM size roll-off: a GEMM whose smallest dimension is d runs at "
            "d / (d + gemm_half_dim) of the large-GEMM efficiency (tile/wave quantization: a "
            "128x128 CTA tile leaves SMs idle on small shards)."
        ),
    )
    attention_efficiency: float = Field(
        default=0.6,
        gt=0,
        le=1,
        description=(
            "Fused attention throughput as a fraction of the BF16 peak, on the full (non-causal) "
            "FLOP count 4*s^2*h per layer that Megatron, PaLM and llm-foundry report: "
            "FlashAttention-2 reaches ~50-70% of A100 peak on the causal-halved count (Dao 2023 "
            "Fig. 4), softmax/masking overheads bring the end-to-end kernel lower."
        ),
    )
    memory_bound_efficiency: float = Field(
        default=0.7,
        gt=0,
        le=1,
        description="Fraction of HBM bandwidth elementwise kernels (norms, activations) reach.",
    )
    intra_node_efficiency: float = Field(
        default=0.8,
        gt=0,
        le=1.5,
        description=(
            "NCCL bus bandwidth / link bandwidth inside a node: nccl-tests all_reduce on DGX "
            "A100 ~230 of 300 GB/s, DGX H100 ~360 of 450 GB/s (without NVLS)."
        ),
    )
    inter_node_efficiency: float = Field(
        default=0.9,
        gt=0,
        le=1.2,
        description="NCCL bus bandwidth / NIC line rate across nodes (IB/RoCE, ~90%).",
    )
    intra_node_latency_us: float = Field(
        default=5.0,
        ge=0,
        le=1e6,
        description="Per-step latency of an intra-node all-reduce ring (and every other op's "
        "reference, see the per-collective scales below).",
    )
    inter_node_latency_us: float = Field(
        default=10.0, ge=0, le=1e6, description="As intra_node_latency_us, across nodes."
    )
    # Per-collective scales. The link efficiencies and latencies above describe all-reduce, the
    # collective nccl-tests headlines and data/tensor parallelism mostly runs; these say how
    # each other op compares with it on the same links. NCCL keeps them close to 1 (its rings
    # run every op at similar bus bandwidth); other backends do not: gloo on CPUs, for one,
    # reduces on the host (all-reduce and reduce-scatter slower) and sends point-to-point
    # without a ring (lower latency, higher bandwidth). Multiplying all-reduce's bus bandwidth
    # (or per-step latency) by the scale gives the op's; 1.0 leaves every op priced like
    # all-reduce, as before these existed. Calibration fits them against all-reduce as the
    # reference, so no scale is ever degenerate with the link efficiencies while all-reduce
    # is measured (costmodel.calibration.space).
    all_gather_bandwidth_scale: float = Field(
        default=1.0, gt=0, le=100, description="All-gather bus bandwidth / all-reduce's."
    )
    all_gather_latency_scale: float = Field(
        default=1.0, gt=0, le=1000, description="All-gather per-step latency / all-reduce's."
    )
    reduce_scatter_bandwidth_scale: float = Field(
        default=1.0, gt=0, le=100, description="Reduce-scatter bus bandwidth / all-reduce's."
    )
    reduce_scatter_latency_scale: float = Field(
        default=1.0, gt=0, le=1000, description="Reduce-scatter per-step latency / all-reduce's."
    )
    all_to_all_bandwidth_scale: float = Field(
        default=1.0, gt=0, le=100, description="All-to-all bandwidth / all-reduce's bus bandwidth."
    )
    all_to_all_latency_scale: float = Field(
        default=1.0, gt=0, le=1000, description="All-to-all per-step latency / all-reduce's."
    )
    p2p_bandwidth_scale: float = Field(
        default=1.0,
        gt=0,
        le=100,
        description=(
            "Point-to-point bandwidth (pipeline sends, context-parallel ring passes) / "
            "all-reduce's bus bandwidth."
        ),
    )
    p2p_latency_scale: float = Field(
        default=1.0, gt=0, le=1000, description="Point-to-point latency / all-reduce's per step."
    )
    grad_reduce_overlap: float = Field(
        default=0.9,
        ge=0,
        le=1,
        description="Fraction of the overlappable backward compute that hides DP traffic.",
    )
    overlap_interference: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description=(
            "Fraction of communication hidden behind compute that still costs time: NCCL "
            "kernels occupy SMs and HBM bandwidth, slowing the GEMMs they overlap (reported "
            "in the 10-30% range by overlap studies such as Wang et al. ASPLOS'23)."
        ),
    )
    tp_comm_overlap_fraction: float = Field(
        default=0.7,
        ge=0,
        le=1,
        description="Share of TP traffic hidden behind GEMMs when tp_comm_overlap is on.",
    )
    per_microbatch_overhead_s: float = Field(
        default=0.0,
        ge=0,
        le=10,
        description="Fixed host/launch overhead per micro-batch and stage.",
    )
    moe_load_imbalance: float = Field(
        default=1.25,
        ge=1,
        le=10,
        description=(
            "Tokens the busiest expert-parallel rank receives / the mean, which sets the pace of "
            "every MoE layer's expert GEMMs and all-to-all when ep > 1 (the ranks synchronize "
            "in the all-to-all). Switch Transformer trains with capacity factor 1.25 (Fedus et "
            "al. 2022, Sec. 2.2 and Table 1): the per-expert load a balanced router is "
            "provisioned for; dropless routers (Megatron-Core) run at the actual maximum."
        ),
    )
    host_op_overhead_us: float = Field(
        default=6.0,
        ge=0,
        le=10_000,
        description=(
            "Host time to issue one kernel (Python, autograd and ATen dispatch, "
            "cudaLaunchKernel). A layer runs no faster than its kernels can be issued, which "
            "binds for small models and thin shards. PyTorch eager issues a 1-element add in "
            "4.5 us on a 5.3 GHz desktop core (PyTorch dev-discuss 'Micro-optimizations for "
            "the most micro of benchmarks', 2024); training hosts' Xeons run at <= 3.8 GHz "
            "(x1.4), and autograd recording adds ~1 us: ~6 us."
        ),
    )
    per_step_overhead_s: float = Field(
        default=0.0, ge=0, le=1000, description="Fixed overhead per optimizer step."
    )
    framework_memory_gib: float = Field(
        default=2.0,
        ge=0,
        le=1000,
        description=(
            "CUDA context, cuBLAS/NCCL workspaces and allocator slack per GPU (typically 1-3 GiB "
            "in PyTorch training jobs)."
        ),
    )
    cpu_adam_GBps: float = Field(
        default=50.0,
        gt=0,
        le=10_000,
        description="Host memory bandwidth the CPU Adam step streams at (optimizer offload).",
    )
    pcie_GBps: float = Field(
        default=25.0, gt=0, le=10_000, description="Host<->GPU copy bandwidth (PCIe Gen4 x16)."
    )


DEFAULT_PARAMS = EfficiencyParams()
