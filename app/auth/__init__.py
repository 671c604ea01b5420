"""Access control: API keys (bearer tokens) that name a tenant, and per-key submission limits.

Off in the embedded default until the first key exists (``AUTOPAR_REQUIRE_AUTH=1``: always on);
while off, every request acts for the ``default`` tenant. Isolation itself is ``app.tenancy``.
"""

from app.auth.access import Principal, admit_request
from app.auth.keys import (
    ApiKeyError,
    create_key,
    list_keys,
    revoke_key,
)
from app.auth.limits import check_search_quota

__all__ = [
    "ApiKeyError",
    "Principal",
    "admit_request",
    "check_search_quota",
    "create_key",
    "list_keys",
    "revoke_key",
]
