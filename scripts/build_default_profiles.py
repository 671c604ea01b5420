"""Build the cost model's per-GPU defaults from published hardware micro-benchmarks.

Reads ``validation/microbench.csv`` (one published figure per row, with its source), turns
every usable row into a sample of a ``costmodel.observations.Profile`` -- the format
``autopar profile`` writes -- for the catalog GPU it was measured on, and writes

- ``costmodel/defaults/profiles/<GPU>.json``: the samples, each citing its row id and source;
- ``costmodel/defaults/params/<GPU>.json``: what ``fit_calibration`` fits to that profile
  (``costmodel.calibration.defaults.fit_default_params``: only the parameters the GPU's data
  identifies), with its provenance. ``costmodel.gpu_defaults.default_params`` reads these.

Rows that cannot be used are listed with the reason (GPU not in the catalog, a figure the
model has no sample for, a non-default NCCL algorithm...). Run from the repository root:

    .venv/bin/python scripts/build_default_profiles.py [validation/microbench.csv]

Conventions (each sample's ``citation`` repeats the ones it relies on):

- GEMM TFLOP/s at (m, n, k): seconds = 2 m n k / rate. The MAMF rows (stas00/ml-engineering
  mamf-finder.py) give the best shape of a brute-force search (``ceiling=True``), timed as 100
  iterations after 50 warm-up ones (under a second: boost clocks, ``sustained=False``); Azure's
  cuBLASLt rows run 10,000 warm-up and 1,000 timed iterations (seconds to minutes of load at the
  large shapes: ``sustained=True``). stas00's H100 BF16 row notes "H200 is the same": it is also
  H200's (only) 16-bit GEMM figure.
- FlashAttention-2 TFLOP/s (Azure AI-benchmarking-guide): its Benchmarks/FlashAttention.py as of
  the results files (commit a849a4d, 2024-09-24; the greps were widened a day after the
  H100/H200 results were committed) runs Dao-AILab flash-attention's
  benchmarks/benchmark_flash_attention.py and keeps the block
  "causal=False, headdim=128, batch_size=2, seqlen=8192": fp16, nheads = dim / headdim =
  2048 / 128 = 16, non-causal, 30 repeats. That benchmark counts 4 b s^2 h d FLOPs per forward
  (halved only when causal), 2.5x that for the backward and 3.5x for forward + backward; the
  results file gives one figure per implementation, which we read as the "fwd + bwd" column (the
  benchmark's headline, and what the later Benchmarks/NVIDIA/FlashAttention.py reports as
  "total"): seconds = 3.5 x 4 b s^2 h d / rate, a non-causal ``forward_backward`` sample
  (calibration prices a non-causal kernel at twice the causal one the model describes).
- STREAM (BabelStream) TB/s: bytes / rate, with BabelStream's default 2^25 float64 elements
  per array (Copy and Mul move 2 arrays, Add and Triad 3; the results file does not state the
  size; time is linear in bytes, so the size does not change the fitted efficiency). Add is
  an ``add`` sample, Copy ``copy``, Mul ``scale``; Triad moves what Add does and Dot is a
  reduction, neither is a kernel kind of the profile format.
- nccl-tests / all_reduce_bench.py bus bandwidth: seconds = size x 2(n-1)/n / busbw
  (nccl-tests PERFORMANCE.md). nccl-tests sweeps powers of two (``-f 2``); Azure's labels
  ("65K", "132K", "33M") are rounded, and we take the power of two they label.
"""

import csv
import json
import math
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from costmodel.calibration.defaults import fit_default_params
from costmodel.hardware import lookup_gpu
from costmodel.observations import (
    AttentionSample,
    CollectiveSample,
    DeviceInfo,
    GemmSample,
    MemorySample,
    Profile,
)

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CSV = ROOT / "validation" / "microbench.csv"
# While validation/microbench.csv is being copied into the repository, the shared copy.
FALLBACK_CSV = Path("/work/shared/validation/microbench.csv")
OUT = ROOT / "costmodel" / "defaults"

# gpu_type spellings -> catalog GPUs. A100 rows name no memory size: the 40 and 80 GB parts are
# the same die and NVLink, so both catalog entries get them (neither has an HBM sample).
GPU_PATTERNS: list[tuple[str, tuple[str, ...]]] = [
    (r"^H100-SXM5-80GB|^NVIDIA H100 SXM", ("H100-80GB",)),
    (r"^H200|^NVIDIA H200 SXM", ("H200-141GB",)),
    (r"^NVIDIA A100 SXM|^A100 \(", ("A100-80GB", "A100-40GB")),
    (r"^NVIDIA B200 SXM|^B200 \(", ("B200",)),
    (r"^NVIDIA GB200 SXM", ("GB200",)),
    (r"^AMD MI300X", ("MI300X",)),
]
# gpu_type spellings deliberately left out, and why.
SKIPPED_GPUS: list[tuple[str, str]] = [
    (
        r"^NVIDIA B300",
        "B300 has no catalog entry (add it to costmodel/hardware.py to use its ceilings)",
    ),
    (
        r"^NVIDIA GH200",
        "GH200 is not H200-141GB: same Hopper die and HBM3e, but a 900 W module power budget "
        "(shared with the Grace CPU) against H200 SXM's 700 W, so its clocks and GEMM "
        "efficiency differ (828.6 against H100/H200's 794.5 BF16 TFLOP/s)",
    ),
    (r"^H800", "H800 has no catalog entry (DeepEP all-to-all rows)"),
    (r"^SM90|^SM100", "the GPU SKU is not named (DeepEP 'SM90'/'SM100' rows)"),
]
# Rows measured with a non-default NCCL algorithm: the model prices what NCCL picks by default.
NON_DEFAULT_ALGORITHM = ("NCCL_NVLS_ENABLE=0 (ring)", "NCCL_ALGO=")

BABELSTREAM_ARRAY_B = 2**25 * 8  # BabelStream default: 2^25 float64 elements per array
STREAM_KERNELS = {"Copy": ("copy", 2), "Mul": ("scale", 2), "Add": ("add", 3)}
UNITS = {"k": 2**10, "m": 2**20, "g": 2**30}


@dataclass
class Collected:
    gemm: list[GemmSample] = field(default_factory=list)
    memory: list[MemorySample] = field(default_factory=list)
    attention: list[AttentionSample] = field(default_factory=list)
    collectives: list[CollectiveSample] = field(default_factory=list)


def catalog_gpus(gpu_type: str) -> tuple[tuple[str, ...], str | None]:
    """(catalog GPUs, None) for a usable spelling, or ((), why not)."""
    for pattern, reason in SKIPPED_GPUS:
        if re.search(pattern, gpu_type):
            return (), reason
    for pattern, names in GPU_PATTERNS:
        if re.search(pattern, gpu_type):
            return names, None
    return (), f"unknown GPU spelling '{gpu_type}'"


def citation(row: dict[str, str], *extra: str) -> str:
    text = f"validation/microbench.csv {row['id']}: {row['source']}"
    return "; ".join([text, *extra])[:1000]


def value_of(row: dict[str, str]) -> float:
    return float(row["measured_value"])


def power_of_two_bytes(label: str) -> float:
    """'65KB' -> 65536, '1MiB' -> 1048576: the power of two a (rounded) size label names."""
    match = re.match(r"\s*([\d.]+)\s*([KMG])i?B", label, re.IGNORECASE)
    if not match:
        raise ValueError(f"no message size in '{label}'")
    approx = float(match.group(1)) * UNITS[match.group(2).lower()]
    return float(2 ** round(math.log2(approx)))


def gemm_sample(row: dict[str, str]) -> GemmSample:
    shape = row["shape_or_size"]
    match = re.search(r"m=(\d+) n=(\d+) k=(\d+)", shape) or re.search(
        r"MxNxK=(\d+)x(\d+)x(\d+)", shape
    )
    if not match:
        raise ValueError(f"no GEMM shape in '{shape}'")
    m, n, k = (int(v) for v in match.groups())
    dtype = "fp8" if row["dtype"].startswith("fp8") else row["dtype"]
    mamf = row["id"].startswith("mle_mamf")
    note = (
        "best shape of mamf-finder.py's brute-force search, mean of 100 iterations after 50 "
        "warm-up (a short burst at boost clocks)"
        if mamf
        else "cuBLASLt (superbench cublaslt_gemm), 10,000 warm-up + 1,000 timed iterations"
    )
    return GemmSample(
        m=m,
        n=n,
        k=k,
        dtype=dtype,  # type: ignore[arg-type]
        median_s=2.0 * m * n * k / (value_of(row) * 1e12),
        citation=citation(row, f"{value_of(row)} TFLOP/s", note, "seconds = 2mnk / rate"),
        sustained=not mamf,
        ceiling=mamf,
    )


def attention_sample(row: dict[str, str]) -> AttentionSample | None:
    if not row["shape_or_size"].startswith("Flash Attention"):
        return None  # PyTorch's unfused attention: not a fused-attention sample
    batch, seq, head_dim, heads = 2, 8192, 128, 2048 // 128
    forward_flops = 4.0 * batch * seq**2 * heads * head_dim
    return AttentionSample(
        batch=batch,
        heads=heads,
        seq_length=seq,
        head_dim=head_dim,
        causal=False,
        direction="forward_backward",
        dtype="fp16",
        median_s=3.5 * forward_flops / (value_of(row) * 1e12),
        citation=citation(
            row,
            f"{value_of(row)} TFLOP/s",
            "Dao-AILab benchmark_flash_attention.py block 'causal=False, headdim=128, "
            "batch_size=2, seqlen=8192' (Azure Benchmarks/FlashAttention.py at a849a4d), "
            "fp16, nheads 2048/128 = 16, 30 repeats, read as its 'fwd + bwd' figure: "
            "seconds = 3.5 x 4 b s^2 h d / rate",
        ),
        sustained=False,
    )


def memory_sample(row: dict[str, str]) -> MemorySample | None:
    name = row["shape_or_size"].removeprefix("STREAM-style").strip()
    if name not in STREAM_KERNELS:
        return None
    kernel, arrays = STREAM_KERNELS[name]
    moved = arrays * BABELSTREAM_ARRAY_B
    return MemorySample(
        kernel=kernel,  # type: ignore[arg-type]
        bytes=float(moved),
        dtype="fp32",
        median_s=moved / (value_of(row) * 1e12),
        citation=citation(
            row,
            f"{value_of(row)} TB/s",
            f"BabelStream {name}: {arrays} arrays of 2^25 float64 (BabelStream's default; the "
            "profile format has no fp64, dtype is nominal: time = bytes / rate)",
        ),
    )


# EFA all-reduces reach their bus bandwidth plateau (within 5%) from 1 GiB on (the B200 4-node
# sweep: 362 GB/s at 1 GiB, 382 GB/s at 16 GiB, 229 GB/s still at 256 MiB).
EFA_BANDWIDTH_BOUND_B = 2**30


def significant_digits(text: str) -> int:
    """Significant digits of a printed number ('0.01' -> 1, '0.56' -> 2, '473.2' -> 4)."""
    digits = text.strip().lstrip("+-").replace(".", "").lstrip("0")
    return len(digits)


def allreduce_sample(row: dict[str, str]) -> CollectiveSample:
    label = row["shape_or_size"]
    ranks_match = re.search(r"(\d+) (?:GPUs|ranks)", label)
    if not ranks_match:
        raise ValueError(f"no rank count in '{label}'")
    ranks = int(ranks_match.group(1))
    nodes_match = re.search(r"(\d+) nodes", label)
    per_node = ranks // int(nodes_match.group(1)) if nodes_match else ranks
    size = power_of_two_bytes(label)
    busbw = value_of(row) * 1e9
    factor = 2.0 * (ranks - 1) / ranks
    azure = row["id"].startswith("az_")
    tool = "nccl-tests all_reduce_perf" if azure or "nccl-tests" in row["notes"] else None
    tool = tool or "all_reduce_bench.py"
    series = f"{row['source'].split(' ')[0]} {tool}, {ranks} ranks ({per_node}/node)"
    return CollectiveSample(
        op="all_reduce",
        size_B=size,
        ranks=ranks,
        ranks_per_node=per_node,
        median_s=size * factor / busbw,
        source=series[:200],
        citation=citation(
            row,
            f"{value_of(row)} GB/s busbw at {label}",
            f"size {size:.0f} B (power of two), seconds = size x 2(n-1)/n / busbw",
        ),
    )


def usable(row: dict[str, str]) -> tuple[str, object] | str:
    """("gemm" | "memory" | ..., sample) or the reason the row is not used."""
    kind = row["kind"]
    if kind == "gemm":
        return "gemm", gemm_sample(row)
    if kind == "attention":
        sample = attention_sample(row)
        if sample:
            return "attention", sample
        return "unfused PyTorch attention: the model prices it from GEMMs and softmax"
    if kind == "hbm":
        sample = memory_sample(row)
        if sample:
            return "memory", sample
        if "Triad" in row["shape_or_size"]:
            return "STREAM Triad moves the bytes Add does (Add is kept); no such kernel kind"
        return "STREAM Dot is a reduction, not an elementwise kernel of the profile format"
    if kind == "allreduce":
        if any(marker in row["shape_or_size"] for marker in NON_DEFAULT_ALGORITHM):
            return "non-default NCCL algorithm forced; the model prices NCCL's default"
        if (
            "EFA" in row["gpu_type"] + row["shape_or_size"]
            and power_of_two_bytes(row["shape_or_size"]) < EFA_BANDWIDTH_BOUND_B
        ):
            return (
                "AWS EFA message below 1 GiB: its time is set by the fabric's latency "
                "(libfabric/SRD, ~0.4 ms per all-reduce on 4 nodes up to 16 MiB), a property "
                "of that fabric, not of the GPU; only bandwidth-bound sizes describe the links"
            )
        if significant_digits(row["measured_value"]) < 2:
            return (
                "bus bandwidth printed with one significant digit (e.g. 0.01 GB/s): rounding "
                "alone puts its time off by up to 50%, too coarse to time a message"
            )
        return "collectives", allreduce_sample(row)
    if kind == "p2p":
        return (
            "nvbandwidth copies are copy-engine memcpys (PCIe host rows, or NVLink peer "
            "reads/copies of unstated size), not NCCL send/recv; the model has one p2p scale "
            "for intra- and inter-node sends, which this cannot set"
        )
    return f"no sample kind for '{kind}'"


def collect(rows: list[dict[str, str]]) -> tuple[dict[str, Collected], list[tuple[str, str]]]:
    collected: dict[str, Collected] = defaultdict(Collected)
    skipped: list[tuple[str, str]] = []
    for row in rows:
        gpus, reason = catalog_gpus(row["gpu_type"])
        if not gpus:
            skipped.append((row["id"], reason or "no catalog GPU"))
            continue
        if "H200 is the same" in row["notes"] and "H200-141GB" not in gpus:
            # stas00's H100 BF16 ceiling says H200 measures the same (same die and clocks):
            # H200's only 16-bit GEMM figure.
            gpus = (*gpus, "H200-141GB")
        result = usable(row)
        if isinstance(result, str):
            skipped.append((row["id"], result))
            continue
        kind, sample = result
        for gpu in gpus:
            getattr(collected[gpu], kind).append(sample)
    return collected, skipped


def profile_of(gpu: str, data: Collected) -> Profile:
    ranks = max([s.ranks for s in data.collectives], default=1)
    per_node = max([s.ranks_per_node for s in data.collectives], default=1)
    return Profile(
        name=f"published micro-benchmarks: {gpu}",
        device=DeviceInfo(
            name=gpu, kind="cuda", ranks=ranks, ranks_per_node=per_node, backend="nccl"
        ),
        gpu=lookup_gpu(gpu),
        software={"transcribed_from": "validation/microbench.csv"},
        gemm=data.gemm,
        memory=data.memory,
        attention=data.attention,
        collectives=data.collectives,
    )


def profile_document(profile: Profile) -> dict[str, object]:
    document = profile.model_dump(mode="json", exclude_none=True)
    document["gpu"] = profile.gpu.name  # by catalog name: peaks stay the catalog's
    return document


def write_json(path: Path, document: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else DEFAULT_CSV
    if not path.is_file() and len(argv) <= 1 and FALLBACK_CSV.is_file():
        path = FALLBACK_CSV
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    collected, skipped = collect(rows)
    for gpu in sorted(collected):
        profile = profile_of(gpu, collected[gpu])
        write_json(OUT / "profiles" / f"{gpu}.json", profile_document(profile))
        document = fit_default_params(profile, profile_file=f"profiles/{gpu}.json")
        write_json(OUT / "params" / f"{gpu}.json", document)
        fitted = ", ".join(f"{k}={v:.4g}" for k, v in document["params"].items())
        provenance = document["provenance"]
        print(
            f"{gpu}: {provenance['points']} points, fit MAPE "
            f"{100 * provenance['fit_error']['mape']:.1f}%: {fitted}"
        )
    print(f"\n{len(skipped)} of {len(rows)} rows not used:")
    reasons: dict[str, list[str]] = defaultdict(list)
    for row_id, reason in skipped:
        reasons[reason].append(row_id)
    for reason, ids in reasons.items():
        print(f"- {len(ids)}: {reason} ({', '.join(ids[:4])}{' ...' if len(ids) > 4 else ''})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
