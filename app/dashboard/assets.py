"""Where the dashboard's templates and static files live, and how pages name them."""

import os
from importlib import metadata
from pathlib import Path

from fastapi import Request
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.responses import Response
from starlette.types import Scope

PACKAGE_DIR = Path(__file__).parent
STATIC_DIR = PACKAGE_DIR / "static"
TEMPLATES_DIR = PACKAGE_DIR / "templates"
STATIC_MOUNT = "/static"

templates = Jinja2Templates(directory=TEMPLATES_DIR)

# Everything a page loads comes from this server: no CDN, no font service, no tracker, so the
# pages work air-gapped, and a third-party URL inside a vendored bundle (ReDoc's footer logo) is
# blocked by the browser instead of being requested.
_SELF_ONLY = {
    "default-src": "'self'",
    "img-src": "'self' data:",
    "font-src": "'self' data:",
    "connect-src": "'self'",
    "frame-ancestors": "'self'",
    "base-uri": "'self'",
    "form-action": "'self'",
}
# Dashboard pages: scripts are files; inline style attributes (chart boxes, colour swatches).
PAGE_CSP = "; ".join(
    f"{key} {value}"
    for key, value in {
        **_SELF_ONLY,
        "script-src": "'self'",
        "style-src": "'self' 'unsafe-inline'",
    }.items()
)
# Swagger UI and ReDoc pages start their bundles with an inline script; ReDoc runs a blob worker.
DOCS_CSP = "; ".join(
    f"{key} {value}"
    for key, value in {
        **_SELF_ONLY,
        "script-src": "'self' 'unsafe-inline' blob:",
        "worker-src": "'self' blob:",
        "style-src": "'self' 'unsafe-inline'",
    }.items()
)


def _package_version() -> str:
    try:
        return metadata.version("autopar")
    except metadata.PackageNotFoundError:
        return "unknown"


templates.env.globals["autopar_version"] = _package_version()


def root_path(request: Request) -> str:
    """The prefix the app is served under (behind a proxy), '' at the root."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def static_url(request: Request, path: str) -> str:
    return f"{root_path(request)}{STATIC_MOUNT}/{path}"


class RevalidatedStaticFiles(StaticFiles):
    """Static files that browsers revalidate (ETag) on every load, so an upgraded package
    never runs stale scripts; an unchanged file still costs only a 304."""

    def file_response(
        self,
        full_path: str | os.PathLike[str],
        stat_result: os.stat_result,
        scope: Scope,
        status_code: int = 200,
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers["Cache-Control"] = "no-cache"
        return response
