"""``WebhookDispatcher``: the thread of a search worker that sends due webhooks, so a slow or
dead receiver delays other webhooks at most, never a search."""

import logging
import threading

from app.webhooks.sender import WebhookSender

logger = logging.getLogger(__name__)


class WebhookDispatcher:
    def __init__(self, sender: WebhookSender, *, poll_s: float, name: str) -> None:
        self._sender = sender
        self._poll_s = poll_s
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop after the attempt in flight (bounded by the sender's timeout)."""
        self._stopping.set()
        self._thread.join(self._sender.policy.timeout_s + 5.0)
        if self._thread.is_alive():
            logger.warning("webhook dispatcher still sending; leaving it")

    def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                made = self._sender.deliver_due(should_stop=self._stopping.is_set)
            except Exception:  # the database is away, ...: log, wait, try again
                logger.exception("delivering webhooks failed")
                made = 0
            if not made:
                self._stopping.wait(self._poll_s)
