"""``/docs`` (Swagger UI) and ``/redoc`` from vendored bundles: they render without internet.

FastAPI's own ``docs_url``/``redoc_url`` load their scripts from a CDN; ``create_app`` turns
those off and this router serves the same pages with ``static/vendor`` asset URLs.
"""

from fastapi import APIRouter, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse

from app.dashboard.assets import DOCS_CSP, root_path, static_url

router = APIRouter(include_in_schema=False)

OAUTH2_REDIRECT_PATH = "/docs/oauth2-redirect"


def _openapi_url(request: Request) -> str:
    return root_path(request) + (request.app.openapi_url or "/openapi.json")


def _self_contained(response: HTMLResponse) -> HTMLResponse:
    response.headers["Content-Security-Policy"] = DOCS_CSP
    return response


@router.get("/docs", response_class=HTMLResponse)
async def swagger_ui(request: Request) -> HTMLResponse:
    page = get_swagger_ui_html(
        openapi_url=_openapi_url(request),
        title=f"{request.app.title} API",
        swagger_js_url=static_url(request, "vendor/swagger-ui/swagger-ui-bundle.js"),
        swagger_css_url=static_url(request, "vendor/swagger-ui/swagger-ui.css"),
        swagger_favicon_url=static_url(request, "favicon.svg"),
        oauth2_redirect_url=root_path(request) + OAUTH2_REDIRECT_PATH,
        # No call to the online spec validator (its badge): the docs must work air-gapped.
        swagger_ui_parameters={"validatorUrl": None},
    )
    return _self_contained(page)


@router.get(OAUTH2_REDIRECT_PATH, response_class=HTMLResponse)
async def swagger_ui_oauth2_redirect() -> HTMLResponse:
    return _self_contained(get_swagger_ui_oauth2_redirect_html())


@router.get("/redoc", response_class=HTMLResponse)
async def redoc(request: Request) -> HTMLResponse:
    page = get_redoc_html(
        openapi_url=_openapi_url(request),
        title=f"{request.app.title} API",
        redoc_js_url=static_url(request, "vendor/redoc/redoc.standalone.js"),
        redoc_favicon_url=static_url(request, "favicon.svg"),
        with_google_fonts=False,
    )
    return _self_contained(page)
