"""A small GPT trained for real, to measure step times of parallel plans (closing the loop).

The model is what the cost model describes (``ModelSpec`` with GeLU MLP, multi-head attention,
untied output layer, no biases or dropout): token embedding, pre-norm blocks of causal SDPA
attention and a 4h MLP, final norm, output layer and cross-entropy. Plans (``TrainPlan``):

- data parallel: ``DistributedDataParallel``, gradients reduced once per step (``no_sync`` on
  all but the last micro-batch, as Megatron accumulates) and overlapped with the last backward;
- tensor parallel: Megatron-LM's layout (Shoeybi et al. 2019, Fig. 3): column-parallel QKV and
  MLP-in, row-parallel projections, an all-reduce after each (``ReduceFromTP``) and one on the
  column-parallel layers' input gradient, overlapped with their weight-gradient GEMM as
  Megatron does (``_ColumnParallelLinear``); a vocabulary-parallel embedding, output layer and
  cross-entropy (each rank holds V/tp rows and logits; max, sum of exponentials and target logit
  are all-reduced), so parameters per rank match the cost model's count;
- pipeline parallel: layers split evenly, stage 0 with the embedding and stage ``pp - 1`` with
  the output layer; all forwards then all backwards per stage (GPipe order; its step time is
  the 1F1B one, (m + p - 1) slots), activations and their gradients sent point to point.

``measure_plans`` runs inside ``profiler.launcher.run_ranks`` (one process per rank):
warm-up steps, then the median of timed steps, each between two barriers.
"""

import statistics
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional
from torch.nn.parallel import DistributedDataParallel

from costmodel.specs import ModelSpec, Plan, TrainingSpec


@dataclass(frozen=True)
class GptShape:
    layers: int = 4
    hidden: int = 256
    heads: int = 8
    vocab: int = 8192
    seq_length: int = 128

    def model_spec(self) -> ModelSpec:
        return ModelSpec(
            name=f"mini-gpt-{self.layers}l-{self.hidden}h",
            num_layers=self.layers,
            hidden_size=self.hidden,
            num_attention_heads=self.heads,
            vocab_size=self.vocab,
        )

    def training_spec(self, global_batch_size: int) -> TrainingSpec:
        # fp32 on CPU: PyTorch CPU kernels are fastest and exact in fp32.
        return TrainingSpec(
            seq_length=self.seq_length, global_batch_size=global_batch_size, precision="fp32"
        )


@dataclass(frozen=True)
class TrainPlan:
    micro_batch_size: int
    dp: int = 1
    tp: int = 1
    pp: int = 1

    @property
    def world(self) -> int:
        return self.dp * self.tp * self.pp

    @property
    def label(self) -> str:
        parts = [
            f"{name}{value}" for name, value in (("dp", self.dp), ("tp", self.tp), ("pp", self.pp))
        ]
        return "-".join(parts) + f"-mbs{self.micro_batch_size}"

    def plan_spec(self) -> Plan:
        # No sequence parallelism: the TP implementation keeps norms and residuals replicated.
        return Plan(
            dp=self.dp,
            tp=self.tp,
            pp=self.pp,
            micro_batch_size=self.micro_batch_size,
            sequence_parallel=False if self.tp > 1 else None,
        )


# ---- tensor-parallel communication (Megatron's f and g operators) ------------------------------
class ReduceFromTP(torch.autograd.Function):
    """All-reduce forward; identity backward (g): the sum feeds replicated computation."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous().clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return grad


class _ColumnParallelLinear(torch.autograd.Function):
    """``x @ weight.T`` whose input gradient is all-reduced over the TP group while the weight
    gradient is computed (Megatron's LinearWithGradAccumulationAndAsyncCommunication with
    async_grad_allreduce, its default): f fused into the linear so the all-reduce overlaps the
    weight-gradient GEMM, as the cost model assumes for the backward pass."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        return x @ weight.t()

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, weight = ctx.saved_tensors
        grad_input = (grad @ weight).contiguous()
        handle = dist.all_reduce(grad_input, async_op=True)
        grad_weight = grad.reshape(-1, grad.shape[-1]).t() @ x.reshape(-1, x.shape[-1])
        handle.wait()
        return grad_input, grad_weight


def column_parallel(x: torch.Tensor, layer: nn.Linear, tp: int) -> torch.Tensor:
    return _ColumnParallelLinear.apply(x, layer.weight) if tp > 1 else layer(x)


def _from_tp(x: torch.Tensor, tp: int) -> torch.Tensor:
    return ReduceFromTP.apply(x) if tp > 1 else x


# ---- the model ----------------------------------------------------------------------------------
class Attention(nn.Module):
    def __init__(self, shape: GptShape, tp: int) -> None:
        super().__init__()
        self.tp = tp
        self.local_heads = shape.heads // tp
        self.head_dim = shape.hidden // shape.heads
        width = self.local_heads * self.head_dim
        self.qkv = nn.Linear(shape.hidden, 3 * width, bias=False)
        self.proj = nn.Linear(width, shape.hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        qkv = column_parallel(x, self.qkv, self.tp)
        qkv = qkv.view(batch, seq, 3, self.local_heads, self.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        y = functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).reshape(batch, seq, self.local_heads * self.head_dim)
        return _from_tp(self.proj(y), self.tp)


class Mlp(nn.Module):
    def __init__(self, shape: GptShape, tp: int) -> None:
        super().__init__()
        self.tp = tp
        self.up = nn.Linear(shape.hidden, 4 * shape.hidden // tp, bias=False)
        self.down = nn.Linear(4 * shape.hidden // tp, shape.hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = functional.gelu(column_parallel(x, self.up, self.tp))
        return _from_tp(self.down(hidden), self.tp)


class Block(nn.Module):
    def __init__(self, shape: GptShape, tp: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(shape.hidden)
        self.attention = Attention(shape, tp)
        self.norm2 = nn.LayerNorm(shape.hidden)
        self.mlp = Mlp(shape, tp)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


def vocab_parallel_cross_entropy(
    logits: torch.Tensor, targets: torch.Tensor, first: int, tp: int
) -> torch.Tensor:
    """Mean cross-entropy when each rank holds the logits of vocabulary entries
    [first, first + V/tp) (Megatron-LM's vocab-parallel loss): the maximum, the sum of
    exponentials and the target's logit are all-reduced, never the logits themselves."""
    if tp == 1:
        return functional.cross_entropy(logits, targets)
    local_vocab = logits.shape[-1]
    with torch.no_grad():
        peak = logits.max(dim=-1).values
        dist.all_reduce(peak, op=dist.ReduceOp.MAX)
    shifted = logits - peak[:, None]
    total = ReduceFromTP.apply(shifted.exp().sum(dim=-1))
    local = targets - first
    mine = (local >= 0) & (local < local_vocab)
    picked = shifted.gather(1, local.clamp(0, local_vocab - 1)[:, None]).squeeze(1)
    target_logit = ReduceFromTP.apply(picked * mine)
    return (total.log() - target_logit).mean()


class Head(nn.Module):
    """Final norm, vocabulary-parallel output layer and cross-entropy (mean over tokens)."""

    def __init__(self, shape: GptShape, tp: int, tp_rank: int) -> None:
        super().__init__()
        self.tp = tp
        self.first = tp_rank * (shape.vocab // tp)
        self.norm = nn.LayerNorm(shape.hidden)
        self.output = nn.Linear(shape.hidden, shape.vocab // tp, bias=False)

    def forward(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = column_parallel(self.norm(x), self.output, self.tp).flatten(0, 1)
        return vocab_parallel_cross_entropy(logits, targets.flatten(), self.first, self.tp)


class VocabParallelEmbedding(nn.Module):
    """Token embedding whose rows are split over the tensor-parallel ranks (Megatron-LM): each
    rank looks up the tokens it holds, zeros the others, and the outputs are all-reduced."""

    def __init__(self, shape: GptShape, tp: int, tp_rank: int) -> None:
        super().__init__()
        self.tp = tp
        self.local_vocab = shape.vocab // tp
        self.first = tp_rank * self.local_vocab
        self.table = nn.Embedding(self.local_vocab, shape.hidden)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if self.tp == 1:
            return self.table(tokens)
        local = tokens - self.first
        mine = (local >= 0) & (local < self.local_vocab)
        out = self.table(local.clamp(0, self.local_vocab - 1)) * mine[..., None]
        return _from_tp(out, self.tp)


class Stage(nn.Module):
    """The layers one pipeline stage holds (all of them without pipelining)."""

    def __init__(self, shape: GptShape, plan: TrainPlan, stage: int, tp_rank: int) -> None:
        super().__init__()
        per_stage = shape.layers // plan.pp
        self.embedding = VocabParallelEmbedding(shape, plan.tp, tp_rank) if stage == 0 else None
        self.blocks = nn.ModuleList(Block(shape, plan.tp) for _ in range(per_stage))
        self.head = Head(shape, plan.tp, tp_rank) if stage == plan.pp - 1 else None

    def forward(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        if self.embedding is not None:
            x = self.embedding(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x, targets) if self.head is not None else x


# ---- one training step per plan kind ------------------------------------------------------------
def _grid(plan: TrainPlan, rank: int) -> tuple[int, int, int]:
    """(dp rank, pp stage, tp rank): tp innermost, then pp, then dp (Megatron's order)."""
    return rank // (plan.tp * plan.pp), rank // plan.tp % plan.pp, rank % plan.tp


def _send(tensor: torch.Tensor, peer: int) -> dist.Work:
    request = dist.isend(tensor, peer)
    assert request is not None  # None only on a rank outside the (default) group
    return request


def _grad(x: torch.Tensor) -> torch.Tensor:
    assert x.grad is not None  # a received activation, after the backward through it
    return x.grad


def _pipeline_step(
    stage_module: nn.Module,  # the Stage, or the DistributedDataParallel wrapping it
    stage: int,
    plan: TrainPlan,
    inputs: list[torch.Tensor],
    targets: list[torch.Tensor],
    shape: GptShape,
) -> None:
    rank = dist.get_rank()
    previous, following = rank - plan.tp, rank + plan.tp
    scale = 1.0 / len(inputs)
    activation_shape = (plan.micro_batch_size, shape.seq_length, shape.hidden)
    outputs, received, pending = [], [], []
    for tokens, target in zip(inputs, targets, strict=True):
        if stage > 0:
            buffer = torch.empty(activation_shape)
            dist.recv(buffer, previous)
            x = buffer.requires_grad_()
            received.append(x)
        else:
            x = tokens
        out = stage_module(x, target)
        if stage < plan.pp - 1:
            pending.append(_send(out.detach().contiguous(), following))
            outputs.append(out)
        else:
            (out * scale).backward()
            if stage > 0:
                pending.append(_send(_grad(x).contiguous(), previous))
    if stage < plan.pp - 1:
        for index, out in enumerate(outputs):
            grad = torch.empty(activation_shape)
            dist.recv(grad, following)
            out.backward(grad)
            if stage > 0:
                pending.append(_send(_grad(received[index]).contiguous(), previous))
    for request in pending:
        request.wait()


@dataclass
class _Trainer:
    shape: GptShape
    plan: TrainPlan
    global_batch_size: int
    distributed: bool = True

    def __post_init__(self) -> None:
        rank = dist.get_rank() if self.distributed else 0
        self.dp_rank, self.stage, tp_rank = _grid(self.plan, rank)
        torch.manual_seed(1234 + self.stage)  # same weights across dp ranks, per stage
        self.module: nn.Module = Stage(self.shape, self.plan, self.stage, tp_rank)
        if self.plan.dp > 1:
            self.module = DistributedDataParallel(self.module)
        self.optimizer = torch.optim.AdamW(self.module.parameters(), lr=1e-4)
        microbatches = self.global_batch_size // (self.plan.dp * self.plan.micro_batch_size)
        generator = torch.Generator().manual_seed(self.dp_rank)  # dp ranks see different data
        size = (self.plan.micro_batch_size, self.shape.seq_length)
        self.inputs = [
            torch.randint(0, self.shape.vocab, size, generator=generator)
            for _ in range(microbatches)
        ]
        self.targets = [
            torch.randint(0, self.shape.vocab, size, generator=generator)
            for _ in range(microbatches)
        ]

    def step(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        if self.plan.pp > 1:
            _pipeline_step(
                self.module, self.stage, self.plan, self.inputs, self.targets, self.shape
            )
        else:
            scale = 1.0 / len(self.inputs)
            last = len(self.inputs) - 1
            for index, (tokens, target) in enumerate(zip(self.inputs, self.targets, strict=True)):
                if index < last and isinstance(self.module, DistributedDataParallel):
                    with self.module.no_sync():
                        (self.module(tokens, target) * scale).backward()
                else:
                    (self.module(tokens, target) * scale).backward()
        self.optimizer.step()


def _timed_steps(trainer: _Trainer, steps: int, distributed: bool) -> list[float]:
    durations = []
    for _ in range(steps):
        if distributed:
            dist.barrier()
        start = time.perf_counter()
        trainer.step()
        if distributed:
            dist.barrier()
        durations.append(time.perf_counter() - start)
    return durations


def measure_plans(
    shape: GptShape,
    plans: list[TrainPlan],
    global_batch_size: int,
    steps: int,
    warmup: int,
    rounds: int = 1,
) -> list[dict[str, float | list[float]]]:
    """Body of every rank: rank 0 returns, per plan, the timed step durations (s) and their
    median. Each plan runs ``warmup`` untimed steps, then ``rounds`` rounds visit the plans in
    turn with ``steps`` timed steps each, so a slow spell of the machine (other processes)
    spreads over all plans instead of biasing one.

    A plan uses either every rank or only rank 0 (``world == 1``: the others wait, idle)."""
    world = dist.get_world_size()
    rank = dist.get_rank()
    trainers: list[_Trainer | None] = []
    for plan in plans:
        if plan.world not in (1, world):
            raise ValueError(f"plan {plan.label} needs {plan.world} ranks, the group has {world}")
        together = plan.world == world
        trainer = None
        if together or rank == 0:
            trainer = _Trainer(shape, plan, global_batch_size, distributed=together and world > 1)
            _timed_steps(trainer, warmup, distributed=together and world > 1)
        trainers.append(trainer)
        dist.barrier()
    durations: list[list[float]] = [[] for _ in plans]
    for _ in range(rounds):
        for index, (plan, trainer) in enumerate(zip(plans, trainers, strict=True)):
            if trainer is not None:
                distributed = plan.world == world and world > 1
                durations[index] += _timed_steps(trainer, steps, distributed)
            dist.barrier()
    return [
        {
            "step_times_s": times,
            "median_step_s": statistics.median(times) if times else float("nan"),
        }
        for times in durations
    ]
