from collections.abc import Sequence

from sqlalchemy.orm import Session

from app.common import record_service
from app.gpus.repository import gpus
from app.orm import GpuTypeRow


def get_gpu(session: Session, *, key: str) -> GpuTypeRow:
    return record_service.get_record(session, repository=gpus, key=key, kind="GPU type")


def list_gpus(
    session: Session, *, name: str | None, cursor: str | None, limit: int
) -> tuple[Sequence[GpuTypeRow], str | None]:
    return record_service.list_records(
        session, repository=gpus, name=name, preset=None, cursor=cursor, limit=limit
    )
