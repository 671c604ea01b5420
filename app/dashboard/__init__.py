"""The web dashboard: server-rendered page shells whose JavaScript reads the public ``/v1`` API.

``install_dashboard`` adds the pages, the offline ``/docs`` and ``/redoc`` (vendored Swagger UI
and ReDoc), the static files and an HTML 404 page for browsers; none of it is in the OpenAPI
schema, and ``/v1`` keeps its JSON errors.
"""

from app.dashboard.install import install_dashboard

__all__ = ["install_dashboard"]
