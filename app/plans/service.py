"""Reading stored plans; the workers write them (``app.plans.repository.store_ranking``)."""

from sqlalchemy.orm import Session

from app.errors import NotFoundError
from app.orm import PlanRow
from app.plans import repository


def get_plan(session: Session, *, plan_id: str) -> PlanRow:
    row = repository.get(session, plan_id=plan_id) if "\x00" not in plan_id else None
    if row is None:
        raise NotFoundError(f"no plan with id '{plan_id}'")
    return row
