"""The dashboard's pages. Each renders a shell; its script fills it from the ``/v1`` API, so
what a page shows is what the API returns (no data reaches a page any other way)."""

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse

from app.dashboard.assets import PAGE_CSP, root_path, templates

router = APIRouter(include_in_schema=False, default_response_class=HTMLResponse)

IdPath = Annotated[str, Path(max_length=200)]


def render(
    request: Request, template: str, *, title: str, nav: str, status_code: int = 200, **data: Any
) -> HTMLResponse:
    """A page: ``data`` becomes ``data-*`` attributes of ``<main>`` for its script."""
    context = {"title": title, "nav": nav, "root": root_path(request), "data": data}
    response = templates.TemplateResponse(request, template, context, status_code=status_code)
    response.headers["Content-Security-Policy"] = PAGE_CSP
    return response


@router.get("/")
async def home(request: Request) -> HTMLResponse:
    return render(request, "home.html", title="Searches", nav="home")


@router.get("/searches/new")
async def new_search(request: Request) -> HTMLResponse:
    return render(request, "new_search.html", title="New search", nav="new")


@router.get("/searches/{search_id}")
async def search_detail(request: Request, search_id: IdPath) -> HTMLResponse:
    return render(request, "search.html", title="Search", nav="home", search_id=search_id)


@router.get("/plans/{plan_id}")
async def plan_detail(request: Request, plan_id: IdPath) -> HTMLResponse:
    return render(request, "plan.html", title="Plan", nav="home", plan_id=plan_id)


@router.get("/compare")
async def compare(request: Request) -> HTMLResponse:
    return render(request, "compare.html", title="Compare plans", nav="home")


@router.get("/calibration")
async def calibration(request: Request) -> HTMLResponse:
    return render(request, "calibration.html", title="Calibration", nav="calibration")


@router.get("/calibrations/{key}")
async def calibration_detail(request: Request, key: IdPath) -> HTMLResponse:
    return render(
        request, "calibration_detail.html", title="Calibration", nav="calibration", key=key
    )
