"""Stored cluster specs. Presets live here too (``is_preset``), loaded from the catalog."""

from collections.abc import Sequence

from sqlalchemy.orm import Session

from app.clusters.repository import clusters
from app.common import record_service
from app.common.limits import check_cluster_size
from app.errors import InvalidInputError
from app.orm import ClusterSpecRow
from costmodel.hardware import UnknownGpuError, lookup_gpu
from costmodel.specs import ClusterSpec

KIND = "cluster"


def check_gpu_names(cluster: ClusterSpec, *, prefix: str = "") -> None:
    """GPU types named by string must be in the catalog; the spec alone cannot check that."""
    for index, group in enumerate(cluster.groups):
        if isinstance(group.gpu, str):
            try:
                lookup_gpu(group.gpu)
            except UnknownGpuError as exc:
                raise InvalidInputError.at(f"{prefix}groups[{index}].gpu", str(exc)) from None


def create_cluster(session: Session, *, spec: ClusterSpec) -> ClusterSpecRow:
    check_gpu_names(spec)
    check_cluster_size(session, spec, field="groups")
    return record_service.create_record(
        session, repository=clusters, spec=spec, kind=KIND, source="api"
    )


def get_cluster(session: Session, *, key: str) -> ClusterSpecRow:
    return record_service.get_record(session, repository=clusters, key=key, kind=KIND)


def list_clusters(
    session: Session, *, name: str | None, preset: bool | None, cursor: str | None, limit: int
) -> tuple[Sequence[ClusterSpecRow], str | None]:
    return record_service.list_records(
        session, repository=clusters, name=name, preset=preset, cursor=cursor, limit=limit
    )


def delete_cluster(session: Session, *, key: str) -> None:
    record_service.delete_record(session, repository=clusters, key=key, kind=KIND)
