"""Wire the dashboard into an app: pages, offline docs, static files, the browser 404 page."""

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.dashboard import docs, router
from app.dashboard.assets import STATIC_DIR, STATIC_MOUNT, RevalidatedStaticFiles

# Paths that are API, not pages: their errors stay JSON whoever asks.
_API_PREFIXES = ("/v1", "/openapi.json", "/healthz")


def install_dashboard(app: FastAPI) -> None:
    """Call after the API routers are included and the error handlers installed."""
    app.include_router(router.router)
    app.include_router(docs.router)
    app.mount(STATIC_MOUNT, RevalidatedStaticFiles(directory=STATIC_DIR), name="static")
    _install_not_found_page(app)


def _wants_page(request: Request) -> bool:
    # The app's own prefix (a mount inside it, such as the static files, adds to root_path).
    prefix = str(request.scope.get("app_root_path", request.scope.get("root_path", "")))
    path = request.url.path.removeprefix(prefix.rstrip("/"))
    return (
        request.method in ("GET", "HEAD")
        and not path.startswith(_API_PREFIXES)
        and not path.startswith(STATIC_MOUNT + "/")
        and "text/html" in request.headers.get("accept", "")
    )


def _install_not_found_page(app: FastAPI) -> None:
    """A browser that asks for a page that does not exist gets an HTML 404 page; everything
    else (every ``/v1`` path, any client not asking for HTML) keeps the JSON error body."""
    json_handler = app.exception_handlers[StarletteHTTPException]

    async def not_found(request: Request, exc: Exception) -> Response:
        if _wants_page(request):
            return router.render(
                request, "not_found.html", title="Not found", nav="", status_code=404
            )
        response = json_handler(request, exc)
        return await response if not isinstance(response, Response) else response

    app.add_exception_handler(404, not_found)
