"""Search constraints: the searchable dimensions, what a constraint on one may say, and its
normalized form (``DimFilter``) that the plan space filters with.

A constraint fixes one value, lists the allowed values, or bounds an integer dimension
(``Range``). This module depends on neither the request nor the space: ``search.request``
validates constraints with ``check_constraint`` and ``search.space`` reads what it needs of a
search through ``SearchScope`` (which ``SearchRequest`` satisfies).
"""

from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, model_validator

from costmodel.specs import ClusterSpec, ModelSpec, NodeGroup, TrainingSpec

# The searchable dimensions and the type of their values. ``num_gpus`` (dp*tp*pp*cp) lets a user
# bound how much of the cluster a plan may use; the others are Plan fields.
INT_DIMS = (
    "dp",
    "tp",
    "pp",
    "cp",
    "ep",
    "etp",
    "vpp",
    "micro_batch_size",
    "zero_stage",
    "num_gpus",
)
BOOL_DIMS = ("sequence_parallel", "offload_optimizer")
RECOMPUTE_MODES = ("none", "selective", "full")
DIMS: tuple[str, ...] = (*INT_DIMS, "recompute", *BOOL_DIMS)

ConstraintValue = int | str | bool


class Range(BaseModel):
    """Inclusive bounds of an integer dimension; either end may be open."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min: int | None = None
    max: int | None = None

    @model_validator(mode="after")
    def _ordered(self) -> "Range":
        if self.min is None and self.max is None:
            raise ValueError("a range needs 'min', 'max' or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"range min ({self.min}) exceeds max ({self.max})")
        return self


# A constraint fixes one value, lists the allowed values, or bounds an integer dimension.
Constraint = Range | list[ConstraintValue] | ConstraintValue


class DimFilter:
    """A normalized constraint: which values of one dimension are allowed."""

    def __init__(self, dim: str, constraint: Constraint) -> None:
        self.dim = dim
        self.range = constraint if isinstance(constraint, Range) else None
        if self.range is None:
            values = constraint if isinstance(constraint, list) else [constraint]
            self.values: frozenset[Any] | None = frozenset(values)
        else:
            self.values = None

    def allows(self, value: Any) -> bool:
        """Whether ``value`` is among the allowed values or inside the range."""
        if self.values is not None:
            return value in self.values
        assert self.range is not None
        low, high = self.range.min, self.range.max
        return (low is None or value >= low) and (high is None or value <= high)

    def keep(self, candidates: list[Any]) -> list[Any]:
        """The ``candidates`` this filter allows, in order."""
        return [value for value in candidates if self.allows(value)]


def dim_filters(constraints: dict[str, Constraint]) -> dict[str, DimFilter]:
    """The normalized form of a request's ``constraints``, by dimension."""
    return {dim: DimFilter(dim, value) for dim, value in constraints.items()}


def check_constraint(dim: str, constraint: Constraint) -> None:
    """Raise ValueError (message starting ``constraints.<dim>:``) unless ``dim`` is a known
    dimension and ``constraint`` a valid one for it."""
    if dim not in DIMS:
        raise ValueError(f"constraints.{dim}: unknown dimension; known: {', '.join(DIMS)}")
    values: list[Any]
    if isinstance(constraint, Range):
        if dim not in INT_DIMS:
            raise ValueError(f"constraints.{dim}: a range applies to integer dimensions only")
        values = [v for v in constraint.model_dump().values() if v is not None]
    elif isinstance(constraint, list):
        if not constraint:
            raise ValueError(f"constraints.{dim}: the list of allowed values is empty")
        values = constraint
    else:
        values = [constraint]
    for value in values:
        if dim in INT_DIMS and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValueError(f"constraints.{dim}: expected integers, got {value!r}")
        if dim in BOOL_DIMS and not isinstance(value, bool):
            raise ValueError(f"constraints.{dim}: expected true or false, got {value!r}")
        if dim == "recompute" and value not in RECOMPUTE_MODES:
            raise ValueError(
                f"constraints.recompute: unknown mode {value!r}; choices: "
                + ", ".join(RECOMPUTE_MODES)
            )
        # (An integer dimension's values are integers: checked first.)
        if dim in INT_DIMS and isinstance(value, int) and value < (0 if dim == "zero_stage" else 1):
            raise ValueError(f"constraints.{dim}: {value} is below the smallest valid value")


class SearchScope(Protocol):
    """What the plan space reads of a search (``SearchRequest`` is one): the specs, the node
    groups and global batch sizes to search, and the constraints as filters."""

    @property
    def model(self) -> ModelSpec:
        """The model searched."""

    @property
    def cluster(self) -> ClusterSpec:
        """The cluster searched."""

    @property
    def global_batch_sizes(self) -> list[int] | None:
        """Global batch sizes requested, or None for the training's."""

    @property
    def batch_sizes(self) -> list[int]:
        """Global batch sizes to search (the requested ones or the training's)."""

    @property
    def search_groups(self) -> list[NodeGroup]:
        """Node groups plans may use."""

    def training_for(self, global_batch_size: int) -> TrainingSpec:
        """The training spec at ``global_batch_size``."""

    def filters(self) -> dict[str, DimFilter]:
        """Per dimension, the constraint's normalized filter."""
