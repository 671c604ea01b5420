"""``AutoparClient``: every endpoint of the service as a typed method.

Requests and answers are the service's own pydantic models (``app.*.schemas``,
``costmodel.specs``), so a client built from this checkout can never disagree with the service
about a field. Errors are one exception, ``ApiError`` (status, code, message, details); an
unreachable service is ``ServiceUnreachableError``. Retries: see ``app.client.retry``.
"""

import os
import time
import uuid
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python

from app.calibrations.schemas import CalibrationCreate, CalibrationPage, CalibrationRecord
from app.client.errors import (
    ApiError,
    ServiceUnreachableError,
    UnexpectedResponseError,
    WaitTimeoutError,
)
from app.client.retry import RetryPolicy
from app.clusters.schemas import ClusterPage, ClusterRecord
from app.estimates.schemas import EstimateRequest, EstimateResponse
from app.exports import ExportFormat, LaunchFramework, PlanExport
from app.gpus.schemas import GpuPage, GpuRecord
from app.health.schemas import Health, Version
from app.modelspecs.schemas import ImportedModelRecord, ModelPage, ModelRecord
from app.observations.schemas import (
    ObservationCreate,
    ObservationPage,
    ObservationRecord,
    PlanObservationCreate,
)
from app.plans.schemas import PlanRecord
from app.presets.schemas import Preset, PresetIndex, PresetKind
from app.profiles.schemas import ProfileCreate, ProfilePage, ProfileRecord
from app.searches.schemas import (
    FINISHED,
    SearchCreate,
    SearchPage,
    SearchPlans,
    SearchProgress,
    SearchRecord,
    SearchStatus,
)
from app.webhooks.schemas import SearchDeliveries, WebhookDelivery
from costmodel.specs import ClusterSpec, ModelSpec

DEFAULT_URL = "http://127.0.0.1:8000"
URL_ENV = "AUTOPAR_URL"
API_KEY_ENV = "AUTOPAR_API_KEY"
_IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})

ModelT = TypeVar("ModelT", bound=BaseModel)
Query = Mapping[str, str | int | bool | None]


def _segment(value: str) -> str:
    """A path parameter, escaped (names may hold '/', '?', spaces; name@version keeps '@')."""
    return quote(value, safe="@")


def request_body(model: BaseModel) -> dict[str, Any]:
    # Only what the caller set: the service fills the defaults, as for any other client.
    body = model.model_dump(mode="json", by_alias=True, exclude_unset=True)
    # Write-only fields (a webhook secret) are excluded from dumps so that no answer echoes
    # them, but a request must carry them.
    for name, field in type(model).model_fields.items():
        if field.exclude and name in model.model_fields_set:
            body[field.alias or name] = to_jsonable_python(getattr(model, name))
    return body


class AutoparClient:
    """A client of one autopar service.

    ``base_url`` and ``api_key`` default to ``$AUTOPAR_URL`` (else http://127.0.0.1:8000) and
    ``$AUTOPAR_API_KEY`` (sent as ``Authorization: Bearer <key>``; none: no header). Use it as a
    context manager, or call ``close()``. ``http`` wraps an existing ``httpx.Client`` instead
    (its base URL is used; the caller closes it).
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        retry: RetryPolicy | None = None,
        http: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = (base_url or os.environ.get(URL_ENV) or DEFAULT_URL).rstrip("/")
        api_key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
        self._headers = {"Accept": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self._owns_http = http is None
        self._http = http or httpx.Client(base_url=self.base_url, timeout=timeout_s)
        if http is not None:
            self.base_url = str(http.base_url).rstrip("/")

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # Transport -----------------------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Query | None = None,
        idempotent: bool | None = None,
        idempotency_key: str | None = None,
    ) -> httpx.Response:
        """One call, retried per ``self.retry`` when that is safe; a non-2xx answer raises
        ``ApiError``, no answer at all ``ServiceUnreachableError``."""
        headers = dict(self._headers)
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        safe = idempotent if idempotent is not None else method in _IDEMPOTENT_METHODS
        safe = safe or idempotency_key is not None
        attempts = self.retry.attempts if safe else 1
        query = {name: value for name, value in (params or {}).items() if value is not None}
        for attempt in range(1, attempts + 1):
            last = attempt == attempts
            try:
                response = self._http.request(
                    method, path, json=json, params=query, headers=headers
                )
            except httpx.TransportError as exc:
                if last:
                    raise ServiceUnreachableError(self.base_url, exc) from exc
                self._sleep(self.retry.pause_s(attempt))
                continue
            if response.is_success:
                return response
            if last or not self.retry.retries_status(response):
                raise ApiError.from_response(response)
            self._sleep(self.retry.pause_s(attempt, response))
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _call(self, model: type[ModelT], method: str, path: str, **kwargs: Any) -> ModelT:
        response = self.request(method, path, **kwargs)
        try:
            return model.model_validate_json(response.content)
        except ValidationError as exc:
            raise UnexpectedResponseError(f"{method} {path} with a {model.__name__}", exc) from exc

    def _create(
        self, model: type[ModelT], path: str, body: Any, key: str | None, **kw: Any
    ) -> ModelT:
        """A creating POST: a fresh Idempotency-Key unless given, so a retry creates nothing
        twice (pass your own key to make a rerun of your program safe as well)."""
        key = key if key is not None else uuid.uuid4().hex
        return self._call(model, "POST", path, json=body, idempotency_key=key, **kw)

    # Health --------------------------------------------------------------------------------
    def health(self) -> Health:
        return self._call(Health, "GET", "/healthz")

    def version(self) -> Version:
        return self._call(Version, "GET", "/v1/version")

    # GPUs ----------------------------------------------------------------------------------
    def list_gpus(
        self, *, name: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> GpuPage:
        params = {"name": name, "limit": limit, "cursor": cursor}
        return self._call(GpuPage, "GET", "/v1/gpus", params=params)

    def get_gpu(self, key: str) -> GpuRecord:
        return self._call(GpuRecord, "GET", f"/v1/gpus/{_segment(key)}")

    # Models --------------------------------------------------------------------------------
    def create_model(self, spec: ModelSpec, *, idempotency_key: str | None = None) -> ModelRecord:
        return self._create(ModelRecord, "/v1/models", request_body(spec), idempotency_key)

    def import_hf_model(
        self,
        config: Mapping[str, Any],
        *,
        name: str | None = None,
        idempotency_key: str | None = None,
    ) -> ImportedModelRecord:
        """Store a Hugging Face ``config.json`` (a dict) as a model spec."""
        return self._create(
            ImportedModelRecord,
            "/v1/models/import-hf",
            dict(config),
            idempotency_key,
            params={"name": name},
        )

    def list_models(
        self,
        *,
        name: str | None = None,
        preset: bool | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> ModelPage:
        params = {"name": name, "preset": preset, "limit": limit, "cursor": cursor}
        return self._call(ModelPage, "GET", "/v1/models", params=params)

    def get_model(self, key: str) -> ModelRecord:
        return self._call(ModelRecord, "GET", f"/v1/models/{_segment(key)}")

    def delete_model(self, key: str) -> None:
        self.request("DELETE", f"/v1/models/{_segment(key)}")

    # Clusters ------------------------------------------------------------------------------
    def create_cluster(
        self, spec: ClusterSpec, *, idempotency_key: str | None = None
    ) -> ClusterRecord:
        return self._create(ClusterRecord, "/v1/clusters", request_body(spec), idempotency_key)

    def list_clusters(
        self,
        *,
        name: str | None = None,
        preset: bool | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> ClusterPage:
        params = {"name": name, "preset": preset, "limit": limit, "cursor": cursor}
        return self._call(ClusterPage, "GET", "/v1/clusters", params=params)

    def get_cluster(self, key: str) -> ClusterRecord:
        return self._call(ClusterRecord, "GET", f"/v1/clusters/{_segment(key)}")

    def delete_cluster(self, key: str) -> None:
        self.request("DELETE", f"/v1/clusters/{_segment(key)}")

    # Presets -------------------------------------------------------------------------------
    def list_presets(self) -> PresetIndex:
        return self._call(PresetIndex, "GET", "/v1/presets")

    def get_preset(self, kind: PresetKind, name: str) -> Preset:
        return self._call(Preset, "GET", f"/v1/presets/{_segment(kind)}/{_segment(name)}")

    # Estimates -----------------------------------------------------------------------------
    def estimate(self, request: EstimateRequest) -> EstimateResponse:
        # Computes and stores nothing: safe to retry.
        return self._call(
            EstimateResponse, "POST", "/v1/estimate", json=request_body(request), idempotent=True
        )

    # Searches ------------------------------------------------------------------------------
    def create_search(
        self, request: SearchCreate, *, idempotency_key: str | None = None
    ) -> SearchRecord:
        """Queue a search (202); follow it with ``get_search`` or ``wait_for``."""
        return self._create(SearchRecord, "/v1/searches", request_body(request), idempotency_key)

    def list_searches(
        self, *, status: SearchStatus | None = None, limit: int = 50, cursor: str | None = None
    ) -> SearchPage:
        params = {"status": status, "limit": limit, "cursor": cursor}
        return self._call(SearchPage, "GET", "/v1/searches", params=params)

    def get_search(self, search_id: str) -> SearchRecord:
        """The search with its progress (trials done, best so far, ETA)."""
        return self._call(SearchRecord, "GET", f"/v1/searches/{_segment(search_id)}")

    def search_progress(self, search_id: str) -> SearchProgress:
        """Trials done of the budget, plans evaluated, best so far, elapsed time and ETA."""
        return self.get_search(search_id).progress

    def search_plans(self, search_id: str) -> SearchPlans:
        return self._call(SearchPlans, "GET", f"/v1/searches/{_segment(search_id)}/plans")

    def cancel_search(self, search_id: str) -> SearchRecord:
        # Cancelling twice is cancelling once.
        path = f"/v1/searches/{_segment(search_id)}/cancel"
        return self._call(SearchRecord, "POST", path, idempotent=True)

    def wait_for(
        self,
        search_id: str,
        *,
        timeout_s: float | None = None,
        poll_s: float = 1.0,
        on_progress: Callable[[SearchRecord], None] | None = None,
    ) -> SearchRecord:
        """Poll until the search has finished and return it (succeeded, failed or cancelled:
        check ``status``). ``on_progress`` gets the record at every poll, the last included.
        More than ``timeout_s`` of waiting raises ``WaitTimeoutError`` (the search runs on)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            record = self.get_search(search_id)
            if on_progress is not None:
                on_progress(record)
            if record.status in FINISHED:
                return record
            if deadline is not None and time.monotonic() + poll_s > deadline:
                raise WaitTimeoutError(search_id, timeout_s or 0.0, record)
            self._sleep(poll_s)

    def search_deliveries(self, search_id: str) -> SearchDeliveries:
        """The search's webhooks (with ``callback_url``) and every attempt to send them."""
        path = f"/v1/searches/{_segment(search_id)}/deliveries"
        return self._call(SearchDeliveries, "GET", path)

    def retry_delivery(self, search_id: str, delivery_id: str) -> WebhookDelivery:
        """Send a failed webhook once more (409 unless it failed). Not retried: a repeat after
        a lost answer would be a 409."""
        path = f"/v1/searches/{_segment(search_id)}/deliveries/{_segment(delivery_id)}/retry"
        return self._call(WebhookDelivery, "POST", path)

    # Plans and exports ---------------------------------------------------------------------
    def get_plan(self, plan_id: str) -> PlanRecord:
        return self._call(PlanRecord, "GET", f"/v1/plans/{_segment(plan_id)}")

    def export_plan(
        self,
        plan_id: str,
        format: ExportFormat,
        *,
        framework: LaunchFramework | None = None,
        image: str | None = None,
    ) -> PlanExport:
        """Launch files for a stored plan; a framework that cannot run it is an ``ApiError``
        422 ``not_launchable`` naming the setting."""
        params = {"format": format, "framework": framework, "image": image}
        path = f"/v1/plans/{_segment(plan_id)}/export"
        return self._call(PlanExport, "GET", path, params=params)

    # Profiles ------------------------------------------------------------------------------
    def create_profile(
        self, request: ProfileCreate, *, idempotency_key: str | None = None
    ) -> ProfileRecord:
        return self._create(ProfileRecord, "/v1/profiles", request_body(request), idempotency_key)

    def list_profiles(self, *, limit: int = 50, cursor: str | None = None) -> ProfilePage:
        params = {"limit": limit, "cursor": cursor}
        return self._call(ProfilePage, "GET", "/v1/profiles", params=params)

    def get_profile(self, profile_id: str) -> ProfileRecord:
        return self._call(ProfileRecord, "GET", f"/v1/profiles/{_segment(profile_id)}")

    def delete_profile(self, profile_id: str) -> None:
        self.request("DELETE", f"/v1/profiles/{_segment(profile_id)}")

    # Observations --------------------------------------------------------------------------
    def observe_plan(
        self,
        plan_id: str,
        request: PlanObservationCreate,
        *,
        idempotency_key: str | None = None,
    ) -> ObservationRecord:
        """Report how a stored plan really ran."""
        path = f"/v1/plans/{_segment(plan_id)}/observations"
        return self._create(ObservationRecord, path, request_body(request), idempotency_key)

    def plan_observations(
        self, plan_id: str, *, limit: int = 50, cursor: str | None = None
    ) -> ObservationPage:
        path = f"/v1/plans/{_segment(plan_id)}/observations"
        return self._call(ObservationPage, "GET", path, params={"limit": limit, "cursor": cursor})

    def create_observation(
        self, request: ObservationCreate, *, idempotency_key: str | None = None
    ) -> ObservationRecord:
        return self._create(
            ObservationRecord, "/v1/observations", request_body(request), idempotency_key
        )

    def list_observations(
        self, *, source: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> ObservationPage:
        params = {"source": source, "limit": limit, "cursor": cursor}
        return self._call(ObservationPage, "GET", "/v1/observations", params=params)

    def get_observation(self, observation_id: str) -> ObservationRecord:
        path = f"/v1/observations/{_segment(observation_id)}"
        return self._call(ObservationRecord, "GET", path)

    def delete_observation(self, observation_id: str) -> None:
        self.request("DELETE", f"/v1/observations/{_segment(observation_id)}")

    # Calibrations --------------------------------------------------------------------------
    def create_calibration(
        self, request: CalibrationCreate, *, idempotency_key: str | None = None
    ) -> CalibrationRecord:
        return self._create(
            CalibrationRecord, "/v1/calibrations", request_body(request), idempotency_key
        )

    def list_calibrations(
        self, *, name: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> CalibrationPage:
        params = {"name": name, "limit": limit, "cursor": cursor}
        return self._call(CalibrationPage, "GET", "/v1/calibrations", params=params)

    def get_calibration(self, key: str) -> CalibrationRecord:
        return self._call(CalibrationRecord, "GET", f"/v1/calibrations/{_segment(key)}")

    def delete_calibration(self, key: str) -> None:
        self.request("DELETE", f"/v1/calibrations/{_segment(key)}")
