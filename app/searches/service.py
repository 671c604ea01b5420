"""Submitting, reading and cancelling searches. Running them is the workers' job."""

import re
from datetime import datetime
from typing import cast

from pydantic import ValidationError
from sqlalchemy.orm import Session

from app.auth import check_search_quota
from app.calibrations.service import params_of, resolve_calibration
from app.common.ids import looks_like_id, new_id
from app.common.pagination import decode_cursor, encode_cursor
from app.common.references import ResolvedSpecs, SpecReferences, resolve_specs
from app.common.text import require_storable
from app.db import begin_write
from app.errors import (
    ConflictError,
    ErrorDetail,
    InvalidInputError,
    NotFoundError,
    summarize,
    validation_details,
)
from app.orm import SearchRow, utcnow
from app.plans import repository as plans
from app.plans.schemas import PlanRecord
from app.searches import repository
from app.searches.limits import check_active_searches, check_search_budget
from app.searches.plan_pages import FinishedPlanPages
from app.searches.progress import StoredProgress, primary_metric
from app.searches.schemas import (
    FINISHED,
    SEARCH_FIELDS,
    BestSoFar,
    SearchCreate,
    SearchPage,
    SearchPlans,
    SearchProgress,
    SearchRecord,
    SearchStatus,
)
from app.webhooks.outbox import enqueue_search_end
from costmodel.errors import split_leading_path
from costmodel.params import EfficiencyParams
from search import SearchRequest


def create_search(
    session: Session, *, request: SearchCreate, server_signs_webhooks: bool = False
) -> SearchRecord:
    """Validate the request into a ``SearchRequest`` (every reason it cannot run is a 422) and
    queue it; a worker picks it up. ``server_signs_webhooks``: the server has a webhook secret
    (``AUTOPAR_WEBHOOK_SECRET``) for a ``callback_url`` given without ``callback_secret``."""
    begin_write(session)
    api_key_id = check_search_quota(session)
    check_active_searches(session)
    check_search_budget(session, request)
    require_storable(request.model_dump(exclude_none=True))
    _check_callback(request, server_signs_webhooks=server_signs_webhooks)
    specs = resolve_specs(session, references=request)
    calibration = (
        resolve_calibration(session, key=request.calibration, field="calibration")
        if request.calibration is not None
        else None
    )
    search_request = _search_request(
        request, specs, params=params_of(calibration) if calibration is not None else None
    )
    search_id = new_id()
    row = SearchRow(
        id=search_id,
        name=request.name,
        status="queued",
        objective=search_request.objective,
        sampler=search_request.sampler,
        request=search_request.model_dump(mode="json"),
        model_id=specs.model_row_id,
        cluster_id=specs.cluster_row_id,
        calibration_id=calibration.id if calibration is not None else None,
        priority=request.priority,
        n_trials=search_request.trials,
        timeout_s=search_request.timeout_s,
        optuna_study_name=repository.study_name_for(search_id),
        api_key_id=api_key_id,
        callback_url=request.callback_url,
        callback_secret=request.callback_secret,
    )
    repository.add(session, row)
    session.commit()
    return to_record(row, now=utcnow())


def get_search(session: Session, *, search_id: str) -> SearchRecord:
    return to_record(_get_row(session, search_id), now=utcnow())


def list_searches(
    session: Session, *, status: str | None, cursor: str | None, limit: int
) -> SearchPage:
    rows, last_id = repository.list_page(
        session, status=status, before=decode_cursor(cursor), limit=limit
    )
    now = utcnow()
    return SearchPage(
        items=[to_record(row, now=now) for row in rows],
        next_cursor=encode_cursor(last_id) if last_id is not None else None,
    )


def cancel_search(session: Session, *, search_id: str) -> SearchRecord:
    """Queued: cancelled at once. Running: flagged, and its worker stops at the next heartbeat,
    keeping the plans found so far. Cancelling a cancelled search again is a no-op; a search
    that succeeded or failed cannot be cancelled (409)."""
    if not looks_like_id(search_id):
        raise _not_found(search_id)
    begin_write(session)
    now = utcnow()
    if repository.cancel_queued(session, search_id=search_id, now=now):
        notify_search_end(session, search_id=search_id, now=now)  # with the cancellation
        session.commit()
        return to_record(_get_row(session, search_id), now=utcnow())
    if repository.request_cancel(session, search_id=search_id):
        session.commit()  # its worker ends it, and sends the webhook then
        return to_record(_get_row(session, search_id), now=utcnow())
    row = _get_row(session, search_id)
    if row.status != "cancelled":
        raise ConflictError(f"search '{row.id}' has already {row.status}; nothing to cancel")
    return to_record(row, now=utcnow())


def notify_search_end(session: Session, *, search_id: str, now: datetime) -> None:
    """Queue the webhook of a search that has just ended (its status changed in this session's
    open transaction, which the caller commits), if it has a ``callback_url``."""
    row = repository.get(session, search_id=search_id)
    if row is not None and row.callback_url is not None:
        enqueue_search_end(session, search=row, record=to_record(row, now=now), now=now)


def search_plans(session: Session, *, search_id: str) -> SearchPlans:
    return _plans_of(session, _get_row(session, search_id))


def search_plans_json(session: Session, *, search_id: str) -> bytes:
    """``search_plans`` as the JSON the API sends, kept once the search has finished
    (``app.searches.plan_pages``)."""
    state = repository.page_state(session, search_id=search_id)
    if state is None:
        raise _not_found(search_id)
    return finished_pages.get_or_build(
        state,
        lambda: (
            _plans_of(session, _get_row(session, search_id)).model_dump_json(by_alias=True).encode()
        ),
    )


def _plans_of(session: Session, row: SearchRow) -> SearchPlans:
    stored = StoredProgress.model_validate(row.progress or {})
    return SearchPlans(
        search_id=row.id,
        status=cast(SearchStatus, row.status),  # written only from SearchStatus values
        objective=row.objective,
        objective_names=stored.outcome.objective_names if stored.outcome else None,
        items=[PlanRecord.model_validate(plan) for plan in plans.ranked(session, search_id=row.id)],
    )


# The pages of finished searches this process has served (their ranking never changes).
finished_pages = FinishedPlanPages()


def to_record(row: SearchRow, *, now: datetime) -> SearchRecord:
    stored = StoredProgress.model_validate(row.progress or {})
    best = None
    if row.best_value is not None:
        metric = primary_metric(row.objective).key
        best = BestSoFar(value=row.best_value, metric=metric, plan_id=stored.best_plan_id)
    elapsed_s = None
    if row.started_at is not None:
        elapsed_s = ((row.finished_at or now) - row.started_at).total_seconds()
    eta_s = None
    if row.status in FINISHED:
        eta_s = 0.0
    elif row.status == "running" and stored.eta_s is not None and row.heartbeat_at is not None:
        eta_s = max(0.0, stored.eta_s - (now - row.heartbeat_at).total_seconds())
    return SearchRecord(
        id=row.id,
        name=row.name,
        status=cast(SearchStatus, row.status),  # written only from SearchStatus values
        objective=row.objective,
        sampler=row.sampler,
        priority=row.priority,
        cancel_requested=row.cancel_requested,
        progress=SearchProgress(
            trials_done=row.trials_done,
            trials_budget=stored.trials_budget,
            evaluated=stored.evaluated,
            feasible=stored.feasible,
            best=best,
            elapsed_s=elapsed_s,
            eta_s=eta_s,
        ),
        outcome=stored.outcome,
        error=row.error,
        study_name=row.optuna_study_name,
        worker=row.lease_owner,
        lease_expires_at=row.lease_expires_at,
        heartbeat_at=row.heartbeat_at,
        attempts=row.attempts,
        calibration_id=row.calibration_id,
        callback_url=row.callback_url,
        model_id=row.model_id,
        cluster_id=row.cluster_id,
        created_at=row.created_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        request=row.request,
    )


def _get_row(session: Session, search_id: str) -> SearchRow:
    row = repository.get(session, search_id=search_id)
    if row is None:
        raise _not_found(search_id)
    return row


def _not_found(search_id: str) -> NotFoundError:
    return NotFoundError(f"no search with id '{search_id}'")


# Validation ------------------------------------------------------------------------------------
def _check_callback(request: SearchCreate, *, server_signs_webhooks: bool) -> None:
    if request.callback_secret is not None:
        if request.callback_url is None:
            raise InvalidInputError.at(
                "callback_secret", "only signs webhooks: give callback_url too, or leave it out"
            )
        require_storable(request.callback_secret, prefix=("callback_secret",))
    elif request.callback_url is not None and not server_signs_webhooks:
        raise InvalidInputError.at(
            "callback_url",
            "no secret to sign its webhooks with: give callback_secret (16 to 200 characters); "
            "this server has no AUTOPAR_WEBHOOK_SECRET",
        )


def _search_request(
    request: SearchCreate, specs: ResolvedSpecs, *, params: EfficiencyParams | None
) -> SearchRequest:
    """The worker's input. Everything that makes a search impossible (a cluster too small for the
    model, a batch no layout divides, an empty space, a zero budget) is refused here, naming the
    field of the request to change."""
    try:
        return SearchRequest(
            model=specs.model,
            training=specs.training,
            cluster=specs.cluster,
            params=params,
            **request.model_dump(include=set(SEARCH_FIELDS)),
        )
    except ValidationError as exc:
        details = validation_details(exc.errors(include_url=False))
    except ValueError as exc:  # SpaceError and friends raised outside a pydantic validator
        details = [ErrorDetail(field=None, reason=str(exc))]
    details = [_blame(detail, request) for detail in details]
    raise InvalidInputError(summarize(details), details=details) from None


def _blame(detail: ErrorDetail, request: SpecReferences) -> ErrorDetail:
    field, reason = detail.field, detail.reason
    # Checks raised outside pydantic start their message with the field they blame
    # ("constraints.dp: ..."); validation_details has split those of validators already.
    named, rest = split_leading_path(reason)
    if named is not None and (field is None or _within(named, field)):
        field, reason = named, rest
    if field is None:
        return ErrorDetail(field=None, reason=reason)
    # The model and cluster may have come by id or preset: blame the field the client used.
    root = re.split(r"[.\[]", field, maxsplit=1)[0]
    given = {"model": request.model_field(), "cluster": request.cluster_field()}.get(root)
    if given is not None and given != root:
        reason = reason if field == root else f"{field}: {reason}"
        field = given
    return ErrorDetail(field=field, reason=reason)


def _within(path: str, field: str) -> bool:
    return path == field or path.startswith((f"{field}.", f"{field}["))
