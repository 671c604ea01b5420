"""Shared pydantic configuration for all specs."""

from pydantic import BaseModel, ConfigDict


class Spec(BaseModel):
    """Base class: unknown fields are errors, instances are immutable and hashable-by-value."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
