"""Who was measured: device identity, software versions, and the GpuSpec that describes it.

A CUDA device whose name matches the catalog is described by its catalog entry (datasheet
peaks), so calibration measures real efficiencies against them. Anything else -- a CPU, a GPU
the catalog lacks -- gets an inline spec with NOMINAL figures derived from the measurements:
each nominal peak is the best measured rate divided by the model's default efficiency for it,
so the uncalibrated model already reproduces the best measurement and calibration has room to
move both ways below the physical bound (100% of nominal peak).
"""

import contextlib
import os
import platform
import re
import socket
import sys
from importlib import metadata

import torch

from costmodel.hardware import DEFAULT_GEMM_EFFICIENCY
from costmodel.observations import CollectiveSample, DeviceInfo, GemmSample, MemorySample
from costmodel.params import DEFAULT_PARAMS
from costmodel.specs import GpuSpec

GIB = 1024**3


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def host_memory_gib() -> float | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB
    except (ValueError, OSError, AttributeError):
        return None


def device_info(
    device: torch.device, ranks: int, threads_per_rank: int | None, backend: str
) -> DeviceInfo:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return DeviceInfo(
            name=props.name,
            kind="cuda",
            ranks=ranks,
            ranks_per_node=ranks,
            memory_gib=props.total_memory / GIB,
            host=socket.gethostname(),
            backend=backend,
        )
    memory = host_memory_gib()
    return DeviceInfo(
        name=f"{cpu_name()} ({threads_per_rank} thread{'s' if threads_per_rank != 1 else ''})",
        kind="cpu",
        ranks=ranks,
        ranks_per_node=ranks,
        threads_per_rank=threads_per_rank,
        memory_gib=memory / ranks if memory else None,
        host=socket.gethostname(),
        backend=backend,
    )


def software_versions() -> dict[str, str]:
    versions = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "platform": platform.platform(),
    }
    for package in ("autopar", "numpy"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[package] = metadata.version(package)
    if torch.version.cuda:
        versions["cuda"] = torch.version.cuda
    if torch.cuda.is_available():
        with contextlib.suppress(AttributeError, RuntimeError):
            versions["nccl"] = ".".join(str(part) for part in torch.cuda.nccl.version())
    versions["mkldnn"] = str(torch.backends.mkldnn.is_available())
    return versions


def nominal_gpu(
    name: str,
    memory_gib: float,
    gemm: list[GemmSample],
    memory: list[MemorySample],
    collectives: list[CollectiveSample],
) -> GpuSpec:
    """An inline GpuSpec whose peaks are the best measured rates over the default efficiencies."""

    def peak(dtype: str) -> float | None:
        rates = [s.flops / s.median_s for s in gemm if s.dtype == dtype]
        return max(rates) / DEFAULT_GEMM_EFFICIENCY / 1e12 if rates else None

    bandwidth = max((s.bytes / s.median_s for s in memory), default=0.0)
    # The scale-up link figure is what the fastest intra-node transfer reached (bus bandwidth
    # for collectives, plain bandwidth for point-to-point: comm.py prices both against it).
    link = max((s.busbw_GBps for s in collectives if s.ranks_per_node >= s.ranks), default=0.0)
    return GpuSpec(
        name=name,
        bf16_tflops=peak("bf16") or 0.0,
        fp16_tflops=peak("fp16"),
        fp32_tflops=peak("fp32"),
        tf32_tflops=peak("tf32"),
        hbm_gib=memory_gib,
        hbm_GBps=bandwidth / DEFAULT_PARAMS.memory_bound_efficiency / 1e9 if bandwidth else 1.0,
        intra_node_GBps=link / DEFAULT_PARAMS.intra_node_efficiency if link else None,
        gemm_efficiency=DEFAULT_GEMM_EFFICIENCY,
    )


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "device"
