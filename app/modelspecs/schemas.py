from app.common.pagination import PageMeta
from app.common.schemas import RecordOut
from costmodel.specs import ModelSpec


class ModelRecord(RecordOut):
    spec: ModelSpec


class ModelPage(PageMeta):
    items: list[ModelRecord]
