"""The plans pages of finished searches, serialized once per process.

A finished search's ranking never changes: the worker stores it in the transaction that ends the
search, and nothing writes a plan afterwards. Its page is what dashboards and schedulers poll,
and building it is most of the request (loading 10 stored estimates, validating them into
models and serializing ~33 kB: 3.5 ms of 4 ms), so the JSON is kept. The search's state is
still read on every request, so the tenant's scope, a deleted search and a search run again
(another status or finish time: another key) are seen at once. Per process, bounded, least
recently used out.
"""

from collections.abc import Callable
from datetime import datetime
from typing import NamedTuple

from app.common.lru import LruCache
from app.searches.schemas import FINISHED

# Pages kept: a top-10 page is ~33 kB, so 256 are under 10 MB per API process.
MAX_PAGES = 256


class PageState(NamedTuple):
    """What a search's page depends on (``app.searches.repository.page_state`` reads it)."""

    id: str
    status: str
    finished_at: datetime | None
    trials_done: int


class FinishedPlanPages:
    """Serialized plan pages, for searches in a finished state only; least recently used out
    first, safe to share between threads."""

    def __init__(self, max_pages: int = MAX_PAGES) -> None:
        self._pages: LruCache[PageState, bytes] = LruCache(max_pages)

    def get_or_build(self, state: PageState, build: Callable[[], bytes]) -> bytes:
        """The page of the search in ``state``: kept once it has finished, else built anew."""
        if state.status not in FINISHED:
            return build()
        page = self._pages.get(state)
        if page is None:
            page = build()
            self._pages.put(state, page)
        return page

    def __len__(self) -> int:
        return len(self._pages)
