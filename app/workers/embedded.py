"""The worker the API runs in a thread of its own process (``AUTOPAR_EMBEDDED_WORKER``)."""

import logging
import threading

from sqlalchemy.orm import Session, sessionmaker

from app.workers.service import SearchWorker, WorkerOptions

logger = logging.getLogger(__name__)

# How long shutdown waits for the running search to stop at its next batch.
STOP_TIMEOUT_S = 30.0


class EmbeddedWorker:
    def __init__(
        self,
        *,
        session_factory: sessionmaker[Session],
        database_url: str,
        options: WorkerOptions | None = None,
    ) -> None:
        self.worker = SearchWorker(
            session_factory=session_factory, database_url=database_url, options=options
        )
        self._thread = threading.Thread(
            target=self.worker.run_forever, name="autopar-embedded-worker", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop polling; a running search goes back to the queue and resumes on restart."""
        self.worker.stop()
        self._thread.join(STOP_TIMEOUT_S)
        if self._thread.is_alive():
            logger.warning("embedded worker still busy after %.0f s; leaving it", STOP_TIMEOUT_S)
