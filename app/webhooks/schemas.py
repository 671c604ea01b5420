from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.webhooks.payload import WebhookEvent

DeliveryStatus = Literal["pending", "delivered", "failed"]


class DeliveryAttempt(BaseModel):
    model_config = ConfigDict(extra="ignore")

    attempt: int = Field(description="1 for the first try.")
    at: datetime = Field(description="When it was sent.")
    status_code: int | None = Field(
        default=None, description="The receiver's HTTP status; null when none came back."
    )
    error: str | None = Field(
        default=None, description="Why no answer came (refused, timed out, ...), shortened."
    )
    duration_s: float = Field(description="Until the answer (or the error).")


class WebhookDelivery(BaseModel):
    id: str = Field(description="Also the Autopar-Delivery header and the payload's delivery_id.")
    search_id: str
    event: WebhookEvent
    url: str
    status: DeliveryStatus = Field(
        description="pending (to be sent, or retried at next_attempt_at), delivered (a 2xx "
        "answer), failed (every attempt refused; POST .../retry tries once more)."
    )
    attempts: int = Field(description="Attempts made (or in flight).")
    next_attempt_at: datetime | None = Field(
        default=None, description="When a pending delivery is (re)tried; null once it ended."
    )
    log: list[DeliveryAttempt] = Field(description="Every attempt, oldest first.")
    created_at: datetime
    delivered_at: datetime | None = None


class SearchDeliveries(BaseModel):
    search_id: str
    items: list[WebhookDelivery] = Field(description="Oldest first (one per end of the search).")
