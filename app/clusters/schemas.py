from app.common.pagination import PageMeta
from app.common.schemas import RecordOut
from costmodel.specs import ClusterSpec


class ClusterRecord(RecordOut):
    spec: ClusterSpec


class ClusterPage(PageMeta):
    items: list[ClusterRecord]
