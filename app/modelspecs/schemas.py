from pydantic import Field

from app.common.pagination import PageMeta
from app.common.schemas import RecordOut
from costmodel.specs import ModelSpec


class ModelRecord(RecordOut):
    spec: ModelSpec


class ImportedModelRecord(ModelRecord):
    warnings: list[str] = Field(
        default_factory=list,
        description="What of the config the cost model does not price exactly (an activation "
        "priced as a near one, sliding windows, soft-capping, ...).",
    )


class ModelPage(PageMeta):
    items: list[ModelRecord]
