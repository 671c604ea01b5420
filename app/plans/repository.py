"""Storage of a search's plans: one row per distinct plan (``plan_hash``) and search."""

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.orm import PlanRow
from search import RankedPlan


def ranked(session: Session, *, search_id: str) -> Sequence[PlanRow]:
    statement = (
        select(PlanRow)
        .where(PlanRow.search_id == search_id, PlanRow.rank.is_not(None))
        .order_by(PlanRow.rank, PlanRow.id)
    )
    return session.scalars(statement).all()


def store_ranking(
    session: Session,
    *,
    search_id: str,
    ranked_plans: Sequence[RankedPlan],
    unranked_plans: Sequence[RankedPlan] = (),
    calibration_id: str | None = None,
    tenant: str,
) -> dict[str, PlanRow]:
    """Make ``ranked_plans`` the search's ranking, keyed by plan hash.

    A plan stored before (an earlier run of the same study) keeps its row and id, so links to it
    stay valid; plans that fell out of the ranking keep their rows with ``rank`` null. The unique
    (search_id, plan_hash) constraint guarantees one row per plan whoever writes.
    """
    statement = select(PlanRow).where(PlanRow.search_id == search_id)
    existing = {
        row.plan_hash: row
        for row in session.scalars(statement.execution_options(populate_existing=True))
    }
    for row in existing.values():
        row.rank = None
    rows: dict[str, PlanRow] = {}
    for found, rank in [*((p, p.rank) for p in ranked_plans), *((p, None) for p in unranked_plans)]:
        if found.plan_hash in rows:
            continue
        row = existing.get(found.plan_hash) or PlanRow(search_id=search_id, tenant=tenant)
        _fill(row, found, rank)
        row.calibration_id = calibration_id
        session.add(row)
        rows[found.plan_hash] = row
    session.flush()
    return rows


def _fill(row: PlanRow, found: RankedPlan, rank: int | None) -> None:
    estimate = found.estimate
    row.rank = rank
    row.plan = found.plan.model_dump(mode="json")
    row.global_batch_size = found.global_batch_size
    row.plan_hash = found.plan_hash
    row.estimate = estimate.model_dump(mode="json")
    row.objective_values = list(found.objective_values)
    row.equivalents = [equivalent.model_dump(mode="json") for equivalent in found.equivalents]
    row.feasible = estimate.feasible
    row.trial_number = found.trial_number
    row.step_time_s = estimate.step_time_s
    row.tokens_per_s = estimate.tokens_per_s
    row.peak_memory_gib = estimate.peak_memory_gib
    row.usd_per_million_tokens = estimate.usd_per_million_tokens
