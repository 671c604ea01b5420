"""Reading stored plans; the workers write them (``app.plans.repository.store_ranking``)."""

from sqlalchemy.orm import Session

from app.common.ids import require_row
from app.orm import PlanRow


def get_plan(session: Session, *, plan_id: str) -> PlanRow:
    return require_row(session, PlanRow, plan_id, kind="plan")
