"""Shared pydantic configuration for all specs."""

from pydantic import BaseModel, ConfigDict


class Spec(BaseModel):
    """Base class: unknown fields are errors and instances are immutable (hashable unless they
    hold lists, e.g. a ClusterSpec's groups)."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False
    )
