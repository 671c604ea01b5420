"""Store and read machine profiles: measured ones (``autopar profile``) and nccl-tests imports."""

from datetime import datetime
from typing import TypedDict, cast

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.common.ids import require_row, row_by_id
from app.common.pagination import decode_cursor, encode_cursor, newest_first
from app.common.text import require_storable
from app.db import begin_write
from app.errors import InvalidInputError
from app.orm import ProfileRow
from app.profiles.nccl_import import NcclImportError, profile_from_nccl_tests
from app.profiles.schemas import (
    ProfileCreate,
    ProfileKind,
    ProfilePage,
    ProfileRecord,
    ProfileSummary,
    SampleCounts,
)
from costmodel.hardware import UnknownGpuError, lookup_gpu
from costmodel.observations import Profile


def create_profile(session: Session, *, request: ProfileCreate) -> ProfileRecord:
    profile, kind = _profile_of(request)
    if request.name is not None:
        profile = profile.model_copy(update={"name": request.name})
    document = profile.model_dump(mode="json")
    require_storable(document, prefix=("profile",))
    begin_write(session)
    row = ProfileRow(
        name=profile.name,
        kind=kind,
        device=profile.device.name,
        raw=document,
        environment={"software": profile.software, "host": profile.device.host},
    )
    session.add(row)
    session.commit()
    return to_record(row)


def get_profile(session: Session, *, profile_id: str) -> ProfileRecord:
    row = require_row(session, ProfileRow, profile_id, kind="profile")
    return to_record(row)


def delete_profile(session: Session, *, profile_id: str) -> None:
    """Calibrations fitted to it keep its id in their inputs and their parameters."""
    begin_write(session)
    row = require_row(session, ProfileRow, profile_id, kind="profile")
    session.delete(row)
    session.commit()


def list_profiles(session: Session, *, cursor: str | None, limit: int) -> ProfilePage:
    rows, last_id = newest_first(
        session, select(ProfileRow), ProfileRow.id, before=decode_cursor(cursor), limit=limit
    )
    return ProfilePage(
        items=[to_summary(row) for row in rows],
        next_cursor=encode_cursor(last_id) if last_id is not None else None,
    )


def find(session: Session, profile_id: str) -> ProfileRow | None:
    return row_by_id(session, ProfileRow, profile_id)


def profile_of_row(row: ProfileRow) -> Profile:
    return Profile.model_validate(row.raw)


def to_summary(row: ProfileRow) -> ProfileSummary:
    return ProfileSummary(**_summary_fields(row))


def to_record(row: ProfileRow) -> ProfileRecord:
    return ProfileRecord(**_summary_fields(row), profile=profile_of_row(row))


class _SummaryFields(TypedDict):
    id: str
    name: str
    kind: ProfileKind
    device: str
    gpu: str
    samples: SampleCounts
    created_at: datetime


def _summary_fields(row: ProfileRow) -> _SummaryFields:
    """Read off the stored document (written from a validated ``Profile``) without validating
    every sample again: lists show many profiles, each with thousands of raw timings."""
    document = row.raw
    return {
        "id": row.id,
        "name": document["name"],
        "kind": cast(ProfileKind, row.kind),  # stored from a ProfileKind (create_profile)
        "device": row.device,
        "gpu": document["gpu"]["name"],
        "samples": SampleCounts(
            **{family: len(document[family]) for family in SampleCounts.model_fields}
        ),
        "created_at": row.created_at,
    }


def _profile_of(request: ProfileCreate) -> tuple[Profile, ProfileKind]:
    given = [field for field in ("profile", "nccl_tests") if getattr(request, field) is not None]
    if len(given) != 1:
        problem = f"got {' and '.join(given)}" if given else "none was given"
        raise InvalidInputError.at(
            given[-1] if given else "profile", f"give exactly one of profile, nccl_tests; {problem}"
        )
    if request.profile is not None:
        return request.profile, "measured"
    imported = request.nccl_tests
    assert imported is not None
    gpu = imported.gpu
    if isinstance(gpu, str):
        try:
            gpu = lookup_gpu(gpu)
        except UnknownGpuError as exc:
            raise InvalidInputError.at("nccl_tests.gpu", str(exc)) from None
    try:
        profile = profile_from_nccl_tests(
            imported.outputs,
            gpu=gpu,
            op=imported.op,
            ranks=imported.ranks,
            ranks_per_node=imported.ranks_per_node,
            name=request.name,
            origin="POST /v1/profiles",
        )
    except NcclImportError as exc:
        where = f"[{exc.index}]" if exc.index is not None else ""
        raise InvalidInputError.at(
            f"nccl_tests.{exc.field}{where}", exc.reason, code="invalid_nccl_tests"
        ) from None
    except ValueError as exc:  # a sample the parser built fails the Profile's own checks
        raise InvalidInputError.at("nccl_tests.outputs", str(exc)) from None
    return profile, "nccl-tests"
