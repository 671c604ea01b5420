"""Compute micro-benchmarks on one device: GEMMs, memory-bound kernels, fused attention.

Each returns ``costmodel.observations`` samples with the quantities the cost model prices them
by (FLOPs, bytes moved), so calibration compares like with like (``costmodel.calibration.points``).
``align`` runs before each measurement: with several ranks measuring at once it is a barrier,
so every measurement sees the same company (all devices busy) rather than whatever the other
ranks happen to be doing after drifting apart.
"""

from collections.abc import Callable, Sequence

import torch
from torch.nn import functional

from costmodel.observations import (
    AttentionPass,
    AttentionSample,
    GemmSample,
    MemoryKernel,
    MemorySample,
)
from costmodel.specs.training import Precision
from profiler.timing import DEFAULT, Timed, TimingPolicy, measure

TORCH_DTYPES: dict[str, torch.dtype] = {
    "fp32": torch.float32,
    "tf32": torch.float32,  # fp32 tensors with TF32 tensor-core matmuls enabled
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}


def _noop() -> None:
    return None


def _sync(device: torch.device):
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def _tf32(enabled: bool) -> None:
    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = enabled


def gemm_samples(
    device: torch.device,
    shapes: list[tuple[int, int, int]],
    dtypes: Sequence[Precision],
    policy: TimingPolicy = DEFAULT,
    align: Callable[[], object] = _noop,
) -> list[GemmSample]:
    """(m x k) @ (k x n) for each (m, n, k) and dtype, into a preallocated output."""
    samples = []
    for dtype in dtypes:
        _tf32(dtype == "tf32")
        for m, n, k in shapes:
            a = torch.randn(m, k, device=device, dtype=TORCH_DTYPES[dtype])
            b = torch.randn(k, n, device=device, dtype=TORCH_DTYPES[dtype])
            out = torch.empty(m, n, device=device, dtype=TORCH_DTYPES[dtype])
            align()

            def matmul(
                a: torch.Tensor = a, b: torch.Tensor = b, out: torch.Tensor = out
            ) -> torch.Tensor:
                return torch.matmul(a, b, out=out)

            timed = measure(matmul, policy, _sync(device))
            samples.append(GemmSample(m=m, n=n, k=k, dtype=dtype, **timed.as_fields()))
    _tf32(False)
    return samples


def memory_samples(
    device: torch.device,
    mebibytes: float,
    dtype: Precision = "fp32",
    policy: TimingPolicy = DEFAULT,
    align: Callable[[], object] = _noop,
) -> list[MemorySample]:
    """Memory-bound kernels over a ``mebibytes`` tensor; bytes = tensors read + written.

    copy/add/scale write into preallocated outputs (pure streaming, what bandwidth is quoted
    as); gelu, layer_norm and softmax allocate their outputs as training code does.
    """
    torch_dtype = TORCH_DTYPES[dtype]
    size = torch.finfo(torch_dtype).bits // 8
    row = 1024
    count = max(row, int(mebibytes * 2**20 / size) // row * row)
    x = torch.randn(count, device=device, dtype=torch_dtype)
    y = torch.randn(count, device=device, dtype=torch_dtype)
    z = torch.empty(count, device=device, dtype=torch_dtype)
    rows = x.view(-1, row)
    kernels: dict[MemoryKernel, tuple[Callable[[], object], int]] = {
        "copy": (lambda: z.copy_(x), 2),
        "add": (lambda: torch.add(x, y, out=z), 3),
        "scale": (lambda: torch.mul(x, 0.5, out=z), 2),
        "gelu": (lambda: functional.gelu(x), 2),
        "layer_norm": (lambda: functional.layer_norm(rows, (row,)), 2),
        "softmax": (lambda: torch.softmax(rows, dim=-1), 2),
    }
    samples = []
    for kernel, (operation, tensors) in kernels.items():
        align()
        timed = measure(operation, policy, _sync(device))
        samples.append(
            MemorySample(
                kernel=kernel, bytes=float(tensors * count * size), dtype=dtype, **timed.as_fields()
            )
        )
    return samples


def attention_samples(
    device: torch.device,
    shapes: list[tuple[int, int, int, int]],
    dtypes: Sequence[Precision],
    policy: TimingPolicy = DEFAULT,
    align: Callable[[], object] = _noop,
) -> list[AttentionSample]:
    """Causal SDPA forward and backward for each (batch, heads, seq_length, head_dim)."""
    samples = []
    for dtype in dtypes:
        for batch, heads, seq, head_dim in shapes:
            q, k, v = (
                torch.randn(
                    batch, heads, seq, head_dim, device=device, dtype=TORCH_DTYPES[dtype]
                ).requires_grad_()
                for _ in range(3)
            )

            def forward(
                q: torch.Tensor = q, k: torch.Tensor = k, v: torch.Tensor = v
            ) -> torch.Tensor:
                return functional.scaled_dot_product_attention(q, k, v, is_causal=True)

            align()
            with torch.no_grad():
                fwd = measure(forward, policy, _sync(device))
            out = forward()
            grad = torch.randn_like(out)
            align()

            def backward(
                out: torch.Tensor = out,
                grad: torch.Tensor = grad,
                q: torch.Tensor = q,
                k: torch.Tensor = k,
                v: torch.Tensor = v,
            ) -> tuple[torch.Tensor, ...]:
                return torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)

            bwd = measure(backward, policy, _sync(device))
            passes: tuple[tuple[AttentionPass, Timed], ...] = (("forward", fwd), ("backward", bwd))
            for direction, timed in passes:
                samples.append(
                    AttentionSample(
                        batch=batch,
                        heads=heads,
                        seq_length=seq,
                        head_dim=head_dim,
                        causal=True,
                        direction=direction,
                        dtype=dtype,
                        **timed.as_fields(),
                    )
                )
    return samples
