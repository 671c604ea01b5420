"""The PyTorch profiler and the small-GPT trainer, on CPU with tiny sizes (2 gloo ranks)."""

import json
from pathlib import Path

import numpy as np
import pytest

# Real torch ranks (gloo) and the mini GPT trainer: half the suite's time.
pytestmark = pytest.mark.slow
torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from app.cli import cli, register_commands  # noqa: E402
from costmodel.observations import Profile  # noqa: E402
from profiler.collectives import COMPUTE_BURST_S  # noqa: E402
from profiler.launcher import run_ranks  # noqa: E402
from profiler.minigpt import (  # noqa: E402
    GptShape,
    ReduceFromTP,
    TrainPlan,
    VocabParallelEmbedding,
    column_parallel,
    measure_plans,
    vocab_parallel_cross_entropy,
)
from profiler.timing import summarize  # noqa: E402

register_commands()


def test_profile_command_measures_this_machine(tmp_path: Path) -> None:
    out = tmp_path / "profile.json"
    result = CliRunner().invoke(cli, ["profile", "--quick", "--ranks", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    profile = Profile.model_validate(json.loads(out.read_text()))
    assert profile.device.kind == "cpu" and profile.device.ranks == 2
    assert profile.device.threads_per_rank is not None
    assert profile.software["torch"] == torch.__version__
    assert {s.op for s in profile.collectives} == {
        "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p"
    }  # fmt: skip
    assert {s.source for s in profile.collectives} == {"torch.distributed gloo"}
    timed = [*profile.gemm, *profile.memory, *profile.attention, *profile.collectives]
    for sample in timed:
        assert sample.repeats >= 5  # never a single-shot timing
        assert sample.low_s <= sample.median_s <= sample.high_s
        assert sample.low_s <= sample.trimmed_mean_s <= sample.high_s
        # The raw samples are kept, and the summary is theirs.
        assert sample.runs_s is not None and len(sample.runs_s) == sample.repeats
        assert sample.median_s == pytest.approx(float(np.median(sample.runs_s)))
    # CPU collectives are timed after a burst of compute, as training runs them.
    assert profile.settings["collectives_after_compute_s"] == COMPUTE_BURST_S
    assert {s.direction for s in profile.attention} == {"forward", "backward"}
    # A CPU is described by nominal peaks derived from what was measured.
    best = max(s.flops / s.median_s for s in profile.gemm if s.dtype == "fp32")
    assert profile.gpu.fp32_tflops == pytest.approx(best / 0.8 / 1e12)
    assert profile.gpu.intra_node_GBps is not None and profile.gpu.intra_node_GBps > 0
    assert "GEMM fp32: best" in result.output


def test_parallel_training_plans_run_and_are_timed() -> None:
    shape = GptShape(layers=2, hidden=32, heads=4, vocab=64, seq_length=16)
    plans = [
        TrainPlan(micro_batch_size=2),
        TrainPlan(micro_batch_size=1, dp=2),
        TrainPlan(micro_batch_size=1, pp=2),
        TrainPlan(micro_batch_size=2, tp=2),
    ]
    results = run_ranks(
        measure_plans, (shape, plans, 4, 1, 1, 2), world=2, backend="gloo", threads_per_rank=1
    )
    assert len(results) == len(plans)
    for result in results:
        assert len(result["step_times_s"]) == 2  # 1 step x 2 rounds
        assert result["median_step_s"] > 0
    assert plans[3].plan_spec().sequence_parallel is False


def _vocab_parallel_matches_full() -> dict[str, float]:
    rank = dist.get_rank()
    torch.manual_seed(0)
    full = torch.randn(12, 10, requires_grad=True)
    targets = torch.randint(0, 10, (12,))
    expected = functional.cross_entropy(full, targets)
    expected.backward()
    local = full.detach()[:, 5 * rank : 5 * (rank + 1)].clone().requires_grad_()
    loss = vocab_parallel_cross_entropy(local, targets, first=5 * rank, tp=2)
    loss.backward()
    grad_error = (local.grad - full.grad[:, 5 * rank : 5 * (rank + 1)]).abs().max()
    # The embedding split the same way looks every token up on the rank that holds its row.
    table = torch.randn(10, 4)
    embedding = VocabParallelEmbedding(GptShape(hidden=4, heads=1, vocab=10), tp=2, tp_rank=rank)
    embedding.table.weight.data.copy_(table[5 * rank : 5 * (rank + 1)])
    lookup_error = (embedding(targets[None, :]) - table[targets][None]).abs().max()
    errors = torch.tensor([abs(loss.item() - expected.item()), grad_error, lookup_error])
    dist.all_reduce(errors, op=dist.ReduceOp.MAX)
    return {"loss": float(errors[0]), "grad": float(errors[1]), "lookup": float(errors[2])}


def test_vocab_parallel_loss_and_embedding_equal_the_full_ones() -> None:
    errors = run_ranks(_vocab_parallel_matches_full, world=2, backend="gloo", threads_per_rank=1)
    assert errors["loss"] < 1e-5
    assert errors["grad"] < 1e-6
    assert errors["lookup"] == 0.0


def _column_parallel_matches_full() -> dict[str, float]:
    """A column-parallel linear (output features split over 2 ranks) followed by its row-
    parallel partner gives the full layers' gradients; the input gradient is the all-reduced
    sum, computed while the weight gradient is (Megatron's async all-reduce)."""
    rank = dist.get_rank()
    torch.manual_seed(0)
    x = torch.randn(3, 4, 6, requires_grad=True)
    up, down = torch.randn(8, 6), torch.randn(6, 8)
    (functional.linear(functional.linear(x, up), down) ** 2).sum().backward()
    rows = slice(4 * rank, 4 * (rank + 1))
    local_x = x.detach().clone().requires_grad_()
    local_up = nn.Linear(6, 4, bias=False)
    local_up.weight.data.copy_(up[rows])
    partial = functional.linear(column_parallel(local_x, local_up, 2), down[:, rows])
    (ReduceFromTP.apply(partial) ** 2).sum().backward()
    expected_up_grad = torch.func.grad(
        lambda w: (functional.linear(functional.linear(x.detach(), w), down) ** 2).sum()
    )(up)[rows]
    errors = torch.tensor(
        [
            (local_x.grad - x.grad).abs().max(),
            (local_up.weight.grad - expected_up_grad).abs().max(),
        ]
    )
    dist.all_reduce(errors, op=dist.ReduceOp.MAX)
    return {"input": float(errors[0]), "weight": float(errors[1])}


def test_column_parallel_linear_gradients_equal_the_full_ones() -> None:
    errors = run_ranks(_column_parallel_matches_full, world=2, backend="gloo", threads_per_rank=1)
    assert errors["input"] < 1e-4
    assert errors["weight"] < 1e-4


def test_bimodal_timings_keep_a_trimmed_mean_that_moves_smoothly() -> None:
    # A collective that either finds its peer ready (0.5 ms) or waits a tick for it (4 ms):
    # the median jumps between the modes as their shares cross one half, the trimmed mean
    # follows the shares (and ignores the one 80 ms hiccup of another process).
    def runs(slow: int) -> list[float]:
        return [0.5e-3] * (40 - slow) + [4e-3] * slow + [80e-3]

    below, above = summarize(runs(19)), summarize(runs(21))
    assert above.median_s / below.median_s == pytest.approx(8.0)
    assert above.trimmed_mean_s / below.trimmed_mean_s < 1.2
    assert below.low_s <= below.trimmed_mean_s <= below.high_s
