from app.common.records import RecordRepository
from app.orm import ModelSpecRow

models = RecordRepository(ModelSpecRow)
