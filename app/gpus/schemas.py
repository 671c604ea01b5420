from app.common.pagination import PageMeta
from app.common.schemas import RecordOut
from costmodel.specs import GpuSpec


class GpuRecord(RecordOut):
    spec: GpuSpec


class GpuPage(PageMeta):
    items: list[GpuRecord]
