"""Response shapes shared by the stored-spec domains (GPU types, models, clusters)."""

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class RecordOut(BaseModel):
    """A stored spec and its bookkeeping; ``spec`` is added by each domain with its type."""

    model_config = ConfigDict(from_attributes=True)

    id: str = Field(description="Use it, or the name, wherever an id is accepted.")
    name: str
    is_preset: bool = Field(description="Built-in catalog entry: read-only.")
    source: str = Field(description="catalog, api or hf (imported from a Hugging Face config).")
    description: str | None = None
    created_at: datetime
    updated_at: datetime
