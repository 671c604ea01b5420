from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from app.db import SessionDep, run_in_session, run_read_in_session
from app.errors import error_responses
from app.exports import ExportFormat, LaunchFramework, PlanExport
from app.exports import service as exports
from app.plans import service
from app.plans.schemas import PlanRecord

router = APIRouter(prefix="/v1/plans", tags=["plans"])

PlanIdPath = Annotated[str, Path(max_length=200, description="Plan id (from a search's plans).")]


@router.get("/{plan_id}", response_model=PlanRecord, responses=error_responses(404))
async def get_plan(plan_id: PlanIdPath, session: SessionDep) -> Any:
    """One plan a search found, with its estimate and rank."""
    return await run_read_in_session(service.get_plan, session, plan_id=plan_id)


# Launch exports (app/exports) ----------------------------------------------------------------
@router.get("/{plan_id}/export", response_model=PlanExport, responses=error_responses(404, 422))
async def export_plan(
    plan_id: PlanIdPath,
    session: SessionDep,
    format: Annotated[ExportFormat, Query(description="What to write the plan as.")],
    framework: Annotated[
        LaunchFramework | None,
        Query(
            description="The launcher slurm and kubernetes wrap (default: the first framework "
            "that can launch the plan); megatron, nemo, deepspeed and torchtitan imply theirs."
        ),
    ] = None,
    image: Annotated[
        str | None, Query(max_length=500, description="Container image (kubernetes).")
    ] = None,
) -> Any:
    """The plan as launch files for a framework that can run it: Megatron-LM flags (and NeMo 2
    overrides), a DeepSpeed config, a torchtitan TOML, a Slurm batch script or Kubeflow jobs.
    A framework that cannot launch the plan is a 422 naming the setting it cannot express."""
    return await run_in_session(
        exports.export_plan,
        session,
        plan_id=plan_id,
        format=format,
        framework=framework,
        image=image,
    )
