"""Queueing a search's end webhook. Called in the transaction that ends the search, so the
delivery exists exactly when the end does: a crash before the commit loses both, a second
finisher (whose conditional status change matched nothing) adds none."""

from datetime import datetime

from sqlalchemy.orm import Session

from app.common.ids import new_id
from app.orm import PlanRow, SearchRow, WebhookDeliveryRow
from app.searches.schemas import SearchRecord
from app.webhooks import repository
from app.webhooks.payload import build_payload, event_for


def enqueue_search_end(
    session: Session, *, search: SearchRow, record: SearchRecord, now: datetime
) -> WebhookDeliveryRow | None:
    """The delivery announcing ``search``'s end (``record``: the search as it now reads), due at
    once; None when the search has no ``callback_url``."""
    if search.callback_url is None:
        return None
    best = record.progress.best
    best_plan = session.get(PlanRow, best.plan_id) if best is not None and best.plan_id else None
    delivery_id = new_id()
    return repository.add(
        session,
        WebhookDeliveryRow(
            id=delivery_id,
            tenant=search.tenant,
            search_id=search.id,
            event=event_for(record.status),
            url=search.callback_url,
            payload=build_payload(delivery_id=delivery_id, record=record, best_plan=best_plan),
            status="pending",
            attempts=0,
            next_attempt_at=now,
            log=[],
        ),
    )
