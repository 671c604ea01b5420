"""What a search is asked to do: the specs, the objective, the sampler, the budget, the constraints.

``SearchRequest`` is the one input of ``run_search`` and is shared unchanged by the CLI, the REST
API and the workers (stored as JSON in the ``searches`` table). Specs may be given as built specs,
mappings, preset names or files (``costmodel.catalog.load_spec`` resolves them), so a request
such as ``{"model": "gpt3-175b", "training": "gpt3-2k", "cluster": "dgx-h100-128n"}`` is valid.

Validation happens at construction and names the field: an unknown constraint dimension, a zero
budget, a cluster that cannot hold the model, a batch that no data-parallel layout divides. A
request that validates always has at least one valid plan to search.
"""

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from costmodel.catalog import load_spec
from costmodel.context import ModelContext
from costmodel.errors import format_validation_error
from costmodel.flops import total_params
from costmodel.hardware import precision_usable, resolve_gpu
from costmodel.params import DEFAULT_PARAMS, EfficiencyParams
from costmodel.specs import ClusterSpec, ModelSpec, NodeGroup, TrainingSpec
from costmodel.specs.base import Integer, Number
from search.constraints import (
    DIMS,
    Constraint,
    DimFilter,
    check_constraint,
    dim_filters,
)
from search.objectives import DEFAULT_MAX_MEMORY_FRACTION
from search.space import check_space

Objective = Literal["throughput", "cost", "time_to_train", "pareto", "goodput", "pareto_goodput"]
Sampler = Literal["auto", "exhaustive", "tpe", "nsga2", "random"]
OBJECTIVES: tuple[str, ...] = (
    "throughput",
    "cost",
    "time_to_train",
    "pareto",
    "goodput",
    "pareto_goodput",
)
SAMPLERS: tuple[str, ...] = ("auto", "exhaustive", "tpe", "nsga2", "random")


def _resolve(kind: str) -> BeforeValidator:
    """Accept a preset name or file path for a spec field, as every other entry point does."""

    def resolve(value: Any) -> Any:
        if isinstance(value, str):
            return load_spec(kind, value)  # SpecError is a ValueError: pydantic names the field
        return value

    return BeforeValidator(resolve)


class SearchRequest(BaseModel):
    """One plan search. See the module docstring for what validation guarantees."""

    model_config = ConfigDict(extra="forbid")

    model: Annotated[ModelSpec, _resolve("model")]
    training: Annotated[TrainingSpec, _resolve("training")]
    cluster: Annotated[ClusterSpec, _resolve("cluster")]
    objective: Objective = Field(
        default="throughput",
        description=(
            "throughput: max tokens/s; cost: min $ per million tokens; time_to_train: min time "
            "for training.train_tokens; pareto: throughput vs cost, the front is returned; "
            "goodput: max effective tokens/s (tokens/s x goodput: failures, checkpoints and "
            "restarts priced, costmodel.goodput); pareto_goodput: effective tokens/s vs $ per "
            "million effective tokens."
        ),
    )
    sampler: Sampler = Field(
        default="auto",
        description=(
            "exhaustive enumerates every valid plan (homogeneous plans on one node group); "
            "auto enumerates small spaces and runs a seeded Optuna study otherwise."
        ),
    )
    trials: Integer | None = Field(
        default=None, ge=1, le=10_000_000, description="Optuna trial budget (whole study)."
    )
    timeout_s: Number | None = Field(
        default=None, gt=0, le=7 * 86_400, description="Wall-clock budget of this run, seconds."
    )
    seed: Integer | None = Field(
        default=None, ge=0, le=2**32 - 1, description="Sampler seed: same seed, same result."
    )
    top_k: Integer = Field(default=10, ge=1, le=1000, description="Ranked plans to return.")
    constraints: dict[str, Constraint] = Field(
        default_factory=dict,
        description=(
            "Per dimension: a fixed value, a list of allowed values or {min, max}. Dimensions: "
            + ", ".join(DIMS)
        ),
    )
    max_memory_fraction: Number = Field(
        default=DEFAULT_MAX_MEMORY_FRACTION,
        gt=0,
        le=1,
        description="A plan may use at most this fraction of each GPU's memory: headroom for "
        "the memory estimate's error (about 10-15%) and the allocator; 1.0 allows a full GPU.",
    )
    global_batch_sizes: list[Integer] | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="Global batch sizes (sequences) to search over; default: training's.",
    )
    groups: list[str] | None = Field(
        default=None,
        min_length=1,
        description="Node groups a plan may use; default: every group of the cluster.",
    )
    warm_start: bool = Field(
        default=True, description="Enqueue heuristic plans (Megatron-, FSDP-style) first."
    )
    params: EfficiencyParams | None = Field(
        default=None,
        description="Cost-model parameters to price plans with (a calibration's); "
        "null: the uncalibrated defaults.",
    )

    @field_validator("constraints")
    @classmethod
    def _known_dims(cls, constraints: dict[str, Constraint]) -> dict[str, Constraint]:
        for dim, constraint in constraints.items():
            check_constraint(dim, constraint)
        return constraints

    @field_validator("global_batch_sizes")
    @classmethod
    def _positive_batches(cls, batches: list[int] | None) -> list[int] | None:
        if batches is None:
            return None
        if any(batch < 1 for batch in batches):
            raise ValueError("every global batch size must be >= 1")
        return sorted(set(batches))

    @model_validator(mode="after")
    def _runnable(self) -> "SearchRequest":
        self._check_groups()
        self._check_objective()
        self._check_cluster_holds_model()
        if self.sampler == "exhaustive" and len(self.search_groups) > 1:
            raise ValueError(
                "sampler: exhaustive enumerates homogeneous plans on one node group; this "
                f"search spans {len(self.search_groups)} groups (pick one with 'groups', or use "
                "auto, tpe, nsga2 or random for heterogeneous plans)"
            )
        check_space(self)
        return self

    # Resolved views ---------------------------------------------------------------------------
    @property
    def batch_sizes(self) -> list[int]:
        """Global batch sizes to search: the requested ones, or the training's."""
        return self.global_batch_sizes or [self.training.global_batch_size]

    @property
    def search_groups(self) -> list[NodeGroup]:
        """Groups plans may use: the requested ones (default: all) that support the precision."""
        names = self.groups or [group.name for group in self.cluster.groups]
        return [self.cluster.group(name) for name in names if self._supports_precision(name)]

    def _supports_precision(self, name: str) -> bool:
        gpu = resolve_gpu(self.cluster.group(name).gpu)
        return precision_usable(gpu, self.training.precision)

    def filters(self) -> dict[str, DimFilter]:
        """Per constrained dimension, its normalized filter."""
        return dim_filters(self.constraints)

    def training_for(self, global_batch_size: int) -> TrainingSpec:
        """The training spec at ``global_batch_size``."""
        if global_batch_size == self.training.global_batch_size:
            return self.training
        return self.training.model_copy(update={"global_batch_size": global_batch_size})

    def fingerprint_fields(self) -> Mapping[str, Any]:
        """What defines the search (not its budget): a resumed study must match these."""
        return self.model_dump(
            mode="json", exclude={"trials", "timeout_s", "top_k", "seed", "warm_start"}
        )

    # Checks -----------------------------------------------------------------------------------
    def _check_groups(self) -> None:
        known = [group.name for group in self.cluster.groups]
        for name in self.groups or []:
            if name not in known:
                raise ValueError(
                    f"groups: unknown node group '{name}'; cluster has: {', '.join(known)}"
                )
            if not self._supports_precision(name):
                gpu = resolve_gpu(self.cluster.group(name).gpu).name
                raise ValueError(
                    f"groups: group '{name}' ({gpu}) has no {self.training.precision} tensor cores"
                )
        if not self.search_groups:
            gpus = sorted({resolve_gpu(group.gpu).name for group in self.cluster.groups})
            raise ValueError(
                f"cluster: no node group can train in {self.training.precision} "
                f"({', '.join(gpus)} lack {self.training.precision} tensor cores)"
            )

    def _check_objective(self) -> None:
        if self.objective == "time_to_train" and self.training.train_tokens is None:
            raise ValueError("objective: time_to_train needs training.train_tokens")
        if self.objective in ("cost", "pareto", "pareto_goodput"):
            for group in self.search_groups:
                gpu = resolve_gpu(group.gpu)
                if group.price_per_gpu_hour is None and gpu.price_per_gpu_hour is None:
                    raise ValueError(
                        f"objective: {self.objective} needs a price; set "
                        f"cluster.groups[{group.name}].price_per_gpu_hour"
                    )

    def _check_cluster_holds_model(self) -> None:
        # Lower bound on GPU memory: with ZeRO-3 and the optimizer offloaded, the GPUs together
        # still hold one copy of the weights and of the gradients (activations come on top).
        ctx = ModelContext.build(self.model, self.training, self.params or DEFAULT_PARAMS)
        needed_gib = total_params(self.model) * (ctx.weight_bytes + ctx.grad_bytes) / 2**30
        available_gib = self.max_memory_fraction * sum(
            group.num_gpus * resolve_gpu(group.gpu).hbm_gib for group in self.search_groups
        )
        if needed_gib > available_gib:
            raise ValueError(
                f"cluster: {self.model.name} needs at least {needed_gib:,.0f} GiB of GPU memory "
                f"for its weights and gradients alone, but the usable GPUs hold "
                f"{available_gib:,.0f} GiB"
            )


def format_request_error(exc: ValidationError) -> str:
    """One line for a rejected request, each problem once and with the field it concerns.

    Rendered by ``costmodel.errors.format_validation_error``: checks that start their message
    with a field (``constraints.tp: ...``) are blamed on it, union-member names are dropped.
    """
    return format_validation_error(exc)
