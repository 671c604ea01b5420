"""Each API process runs requests on ``request_threads`` threads and freezes its startup objects
(app.serving), as the settings say."""

import gc
from collections.abc import Iterator

import anyio
import anyio.to_thread
import pytest

from app.serving import tune_process
from app.settings import Settings


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the test process keeps collecting everything


def test_the_process_takes_its_thread_count_and_freezes(unfrozen: None) -> None:
    async def tuned(settings: Settings) -> tuple[float, int]:
        tune_process(settings)
        limiter = anyio.to_thread.current_default_thread_limiter()
        return limiter.total_tokens, gc.get_freeze_count()

    tokens, frozen = anyio.run(tuned, Settings(request_threads=3, freeze_startup_objects=True))
    assert tokens == 3 and frozen > 0
    gc.unfreeze()
    tokens, frozen = anyio.run(tuned, Settings(request_threads=7, freeze_startup_objects=False))
    assert tokens == 7 and frozen == 0


def test_bad_thread_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="request_threads"):
        Settings(request_threads=0)
