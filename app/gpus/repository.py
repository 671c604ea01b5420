from app.common.records import RecordRepository
from app.orm import GpuTypeRow

gpus = RecordRepository(GpuTypeRow)
