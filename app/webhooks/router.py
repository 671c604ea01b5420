from typing import Annotated, Any

from fastapi import APIRouter, Path, status

from app.db import SessionDep, run_in_session
from app.errors import error_responses
from app.searches.router import SearchIdPath
from app.webhooks import service
from app.webhooks.schemas import SearchDeliveries, WebhookDelivery

router = APIRouter(prefix="/v1/searches", tags=["webhooks"])

DeliveryIdPath = Annotated[str, Path(max_length=200, description="Delivery id.")]


@router.get(
    "/{search_id}/deliveries", response_model=SearchDeliveries, responses=error_responses(404)
)
async def list_deliveries(search_id: SearchIdPath, session: SessionDep) -> Any:
    """The webhooks of a search with a ``callback_url`` (one when it ends) and how sending them
    went: every attempt with the receiver's status code or the error, and its duration.

    Each is POSTed with ``Autopar-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of
    "<t>." + body>``, ``Autopar-Event`` and ``Autopar-Delivery`` (the id, for de-duplication);
    any 2xx answer delivers it, anything else is retried with exponential backoff until the
    worker's attempt limit, then it is failed.
    """
    return await run_in_session(service.list_deliveries, session, search_id=search_id)


@router.post(
    "/{search_id}/deliveries/{delivery_id}/retry",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=WebhookDelivery,
    responses=error_responses(404, 409),
)
async def retry_delivery(
    search_id: SearchIdPath, delivery_id: DeliveryIdPath, session: SessionDep
) -> Any:
    """Send a failed delivery once more (a worker picks it up at once); 409 when it is pending
    or was delivered."""
    return await run_in_session(
        service.retry_delivery, session, search_id=search_id, delivery_id=delivery_id
    )
