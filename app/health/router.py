from fastapi import APIRouter

from app.db import PublicSessionDep, run_in_session
from app.errors import error_responses
from app.health import service
from app.health.schemas import Health, Version

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, responses=error_responses(503))
async def healthz(session: PublicSessionDep) -> Health:
    """200 when the API and its database answer; 503 otherwise."""
    return await run_in_session(service.check_health, session)


@router.get("/v1/version", response_model=Version)
async def version(session: PublicSessionDep) -> Version:
    return await run_in_session(service.version_info, session)
