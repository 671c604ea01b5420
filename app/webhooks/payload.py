"""What a webhook says: the event, the search as ``GET /v1/searches/{id}`` returns it, its best
plan in brief, and where to fetch the rest."""

from typing import Any, Literal

from app.orm import PlanRow
from app.searches.schemas import SearchRecord

WebhookEvent = Literal["search.succeeded", "search.failed", "search.cancelled"]
EVENTS: dict[str, WebhookEvent] = {
    "succeeded": "search.succeeded",
    "failed": "search.failed",
    "cancelled": "search.cancelled",
}


def event_for(status: str) -> WebhookEvent:
    """The event of a finished search's status (KeyError for a search still queued or running:
    only an end is announced)."""
    return EVENTS[status]


def build_payload(
    *, delivery_id: str, record: SearchRecord, best_plan: PlanRow | None
) -> dict[str, Any]:
    search_path = f"/v1/searches/{record.id}"
    return {
        "event": event_for(record.status),
        "delivery_id": delivery_id,
        "search": record.model_dump(mode="json"),
        "best_plan": _plan_summary(best_plan) if best_plan is not None else None,
        "links": {
            "search": search_path,
            "plans": f"{search_path}/plans",
            # {format}: one of app.exports.schemas.EXPORT_FORMATS (megatron, slurm, ...).
            "export": (
                f"/v1/plans/{best_plan.id}/export?format={{format}}"
                if best_plan is not None
                else None
            ),
        },
    }


def _plan_summary(row: PlanRow) -> dict[str, Any]:
    """The figures a scheduler decides on; ``GET /v1/plans/{id}`` has the whole estimate."""
    return {
        "id": row.id,
        "rank": row.rank,
        "plan": row.plan,
        "global_batch_size": row.global_batch_size,
        "objective_values": row.objective_values,
        "tokens_per_s": row.tokens_per_s,
        "step_time_s": row.step_time_s,
        "peak_memory_gib": row.peak_memory_gib,
        "usd_per_million_tokens": row.usd_per_million_tokens,
    }
