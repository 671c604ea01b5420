"""A typed Python client of the autopar service (httpx).

from app.client import AutoparClient
from app.searches.schemas import SearchCreate

with AutoparClient("http://autopar:8000", api_key="...") as autopar:
    search = autopar.create_search(
        SearchCreate(preset="llama3-70b", training="llama3-8k", cluster_id="dgx-h100-16n")
    )
    done = autopar.wait_for(search.id, timeout_s=600, on_progress=print)
    best = autopar.search_plans(search.id).items[0]
    export = autopar.export_plan(best.id, "slurm")
"""

from app.client.client import DEFAULT_URL, AutoparClient
from app.client.errors import (
    ApiError,
    AutoparError,
    ServiceUnreachableError,
    UnexpectedResponseError,
    WaitTimeoutError,
)
from app.client.retry import NO_RETRIES, RetryPolicy

__all__ = [
    "DEFAULT_URL",
    "NO_RETRIES",
    "ApiError",
    "AutoparClient",
    "AutoparError",
    "RetryPolicy",
    "ServiceUnreachableError",
    "UnexpectedResponseError",
    "WaitTimeoutError",
]
