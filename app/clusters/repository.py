from app.common.records import RecordRepository
from app.orm import ClusterSpecRow

clusters = RecordRepository(ClusterSpecRow)
