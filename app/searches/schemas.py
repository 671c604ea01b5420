import copy
import ipaddress
from datetime import datetime
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, field_validator
from pydantic.fields import FieldInfo

from app.common.pagination import PageMeta
from app.common.references import Reference, SpecReferences
from app.plans.schemas import PlanRecord
from costmodel.specs.base import Integer, Number
from search.constraints import Constraint
from search.objectives import DEFAULT_MAX_MEMORY_FRACTION
from search.request import Objective, Sampler, SearchRequest

SearchStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]
FINISHED: tuple[str, ...] = ("succeeded", "failed", "cancelled")
MAX_CALLBACK_URL_LENGTH = 2000


def _as_in_search_request(name: str) -> Any:
    """The field exactly as ``SearchRequest`` declares it (default, bounds, description)."""
    field: FieldInfo = SearchRequest.model_fields[name]
    return copy.deepcopy(field)


class SearchCreate(SpecReferences):
    """A ``SearchRequest`` whose model, training and cluster may also be stored ones or presets
    (as in ``POST /v1/estimate``), plus a label and a queue priority."""

    name: str | None = Field(default=None, min_length=1, max_length=200, description="Label.")
    priority: Integer = Field(
        default=0, ge=-1000, le=1000, description="Higher runs first; equal: oldest first."
    )
    objective: Objective = _as_in_search_request("objective")
    sampler: Sampler = _as_in_search_request("sampler")
    trials: Integer | None = _as_in_search_request("trials")
    timeout_s: Number | None = _as_in_search_request("timeout_s")
    seed: Integer | None = _as_in_search_request("seed")
    # The copied field brings Integer's no-booleans validator with it (its metadata).
    top_k: int = _as_in_search_request("top_k")
    constraints: dict[str, Constraint] = _as_in_search_request("constraints")
    max_memory_fraction: Number = Field(
        default=DEFAULT_MAX_MEMORY_FRACTION,
        gt=0,
        le=1,
        description="A plan may use at most this fraction of each GPU's memory: headroom for "
        "the memory estimate's error (about 15%) and allocator fragmentation; 1 uses it all.",
    )
    global_batch_sizes: list[Integer] | None = _as_in_search_request("global_batch_sizes")
    groups: list[str] | None = _as_in_search_request("groups")
    warm_start: bool = _as_in_search_request("warm_start")
    calibration: Reference | None = Field(
        default=None,
        description="Price plans with this calibration (id, name@version, or name for its "
        "latest version); default: the uncalibrated model. Its plans record it.",
    )
    callback_url: str | None = Field(
        default=None,
        max_length=MAX_CALLBACK_URL_LENGTH,
        description="An http(s) URL POSTed a signed webhook when the search succeeds, fails or "
        "is cancelled (see GET /v1/searches/{id}/deliveries); needs callback_secret or the "
        "server's AUTOPAR_WEBHOOK_SECRET.",
    )
    # Write-only: excluded from dumps and never part of a response (SearchRecord has no such
    # field); stored because every attempt is signed with it.
    callback_secret: str | None = Field(
        default=None,
        min_length=16,
        max_length=200,
        exclude=True,
        repr=False,
        description="Key of the webhooks' HMAC-SHA256 signature (write-only); default: the "
        "server's AUTOPAR_WEBHOOK_SECRET.",
        json_schema_extra={"writeOnly": True, "format": "password"},
    )

    @field_validator("callback_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        return check_callback_url(value)


def check_callback_url(url: str) -> str:
    """An absolute http or https URL with a host, or a ValueError saying what it lacks."""
    if any(char.isspace() or ord(char) < 0x20 or ord(char) == 0x7F for char in url):
        raise ValueError("must not contain whitespace or control characters")
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # an unclosed IPv6 bracket, ...
        raise ValueError(f"not a URL: {exc}") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise ValueError("must be an http:// or https:// URL")
    host = parts.hostname
    if not host:
        raise ValueError("must name a host")
    try:
        parts.port  # noqa: B018 -- parsing it is the check
    except ValueError as exc:
        raise ValueError(f"bad port: {exc}") from None
    _check_host(host)
    return url


def _check_host(host: str) -> None:
    """A host name the sender can resolve (IDNA: no empty or over-long labels); checked here so
    a URL that could never be sent is a 422, not a delivery that fails 12 times."""
    try:
        ipaddress.ip_address(host)
        return
    except ValueError:
        pass
    try:
        host.encode("idna")
    except UnicodeError as exc:
        raise ValueError(f"bad host name: {exc}") from None


# The SearchRequest fields SearchCreate passes through unchanged (the rest are the specs, and
# the cost-model parameters, which come from ``calibration``).
SEARCH_FIELDS: tuple[str, ...] = tuple(
    name
    for name in SearchRequest.model_fields
    if name not in ("model", "training", "cluster", "params")
)


class BestSoFar(BaseModel):
    value: float = Field(description="Objective value (a Pareto search: its first objective).")
    metric: str = Field(description="The estimate field it is, e.g. tokens_per_s.")
    plan_id: str | None = Field(
        default=None, description="GET /v1/plans/{plan_id}; known once the ranking is stored."
    )


class SearchProgress(BaseModel):
    trials_done: int = Field(
        description="Finished trials of the study (all workers together); when the space is "
        "enumerated instead, plans priced so far."
    )
    trials_budget: int | None = Field(
        default=None, description="What trials_done runs up to; null when only time is budgeted."
    )
    evaluated: int | None = Field(
        default=None, description="Distinct plans priced; known when the search has finished."
    )
    feasible: int | None = Field(
        default=None, description="Of those, plans that fit in memory; known when finished."
    )
    best: BestSoFar | None = None
    elapsed_s: float | None = Field(default=None, description="Since a worker first started it.")
    eta_s: float | None = Field(
        default=None, description="Estimated seconds left at the current pace (or time budget)."
    )


class SearchOutcome(BaseModel):
    """How the run that produced the stored ranking went (``search.SearchResult``'s summary)."""

    sampler: str = Field(description="The sampler that ran ('auto' resolved).")
    status: Literal["completed", "stopped", "timeout"]
    objective_names: list[str]
    directions: list[Literal["maximize", "minimize"]]
    space_size: int | None = None
    trials: int | None = None
    single_type_best_plan_id: str | None = Field(
        default=None, description="Heterogeneous searches: the best plan on one GPU type."
    )
    gain_over_single_type: float | None = None
    notes: list[str] = Field(default_factory=list)


class SearchRecord(BaseModel):
    id: str
    name: str | None
    status: SearchStatus
    objective: str
    sampler: str
    priority: int
    cancel_requested: bool
    progress: SearchProgress
    outcome: SearchOutcome | None = Field(default=None, description="Set when it has finished.")
    error: str | None = Field(default=None, description="Why it failed.")
    study_name: str | None = Field(
        default=None,
        description="Optuna study in the service's database (optuna-dashboard); none is made "
        "when the space is small enough to enumerate.",
    )
    worker: str | None = Field(default=None, description="Worker holding the lease.")
    lease_expires_at: datetime | None = None
    heartbeat_at: datetime | None = None
    attempts: int = Field(
        description="Workers that took it and did not hand it back (more than 1: resumed "
        "after a worker died); a search is failed when the third one dies."
    )
    calibration_id: str | None = Field(
        default=None, description="The calibration its plans are priced with (null: none)."
    )
    callback_url: str | None = Field(
        default=None, description="Where its end is POSTed (webhook); its secret is not shown."
    )
    model_id: str | None = Field(default=None, description="Stored model it was given as.")
    cluster_id: str | None = Field(default=None, description="Stored cluster it was given as.")
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    request: dict[str, Any] = Field(description="The full SearchRequest, specs resolved.")


class SearchPage(PageMeta):
    items: list[SearchRecord]


class SearchPlans(BaseModel):
    search_id: str
    status: SearchStatus
    objective: str
    objective_names: list[str] | None = Field(
        default=None, description="What each plan's objective_values are; set once finished."
    )
    items: list[PlanRecord] = Field(description="The ranked plans, best first.")
