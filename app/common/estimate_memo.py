"""The last estimates this process priced, by what they were priced from.

An estimate is a pure function of the model, training, cluster and plan specs and the efficiency
parameters, so the same inputs priced again give the same answer: a dashboard re-asking for the
plan on screen, a scheduler polling, a client retrying. Pricing is most of an estimate request's
CPU (about 1.7 ms of 2.7 ms for a 7B model on 8 nodes; ``benchmarks/bench_api_wrk.sh``), so those
repeats are answered from memory. The key is the canonical JSON of every input (the resolved
specs, never the names that led to them), so an edited stored cluster or a new calibration is
another key, and a new cost model is a new process. Kept per process, bounded, least recently
used first out.
"""

import hashlib
from collections.abc import Callable

from pydantic import BaseModel

from app.common.lru import LruCache
from costmodel.specs import Estimate

# Entries kept: an Estimate with per-stage breakdowns is a few kB (a 64-stage plan ~60 kB), so
# 1,024 of them stay within tens of MB per API process.
DEFAULT_ENTRIES = 1024


class EstimateMemo:
    """Estimates keyed by their inputs, least recently used out first; safe to share between
    threads. Estimates handed out are shared: callers copy before changing one
    (``EstimateResponse(**dict(estimate))`` does)."""

    def __init__(self, max_entries: int = DEFAULT_ENTRIES) -> None:
        self._entries: LruCache[bytes, Estimate] = LruCache(max_entries)
        self.hits = 0  # counted without a lock: figures to look at, not to rely on
        self.misses = 0

    @staticmethod
    def key(*inputs: BaseModel | None) -> bytes:
        """SHA-256 of the inputs' canonical JSON (``None`` for an absent one, e.g. no params)."""
        digest = hashlib.sha256()
        for spec in inputs:
            digest.update(b"null" if spec is None else spec.model_dump_json().encode())
            digest.update(b"\x1e")  # record separator: no two input lists share a byte string
        return digest.digest()

    def get_or_price(self, key: bytes, price: Callable[[], Estimate]) -> Estimate:
        """The estimate stored under ``key``, else ``price()`` stored. Errors are not stored.
        Two threads missing on one key both price it (no lock is held while pricing)."""
        found = self._entries.get(key)
        if found is not None:
            self.hits += 1
            return found
        self.misses += 1
        priced = price()
        self._entries.put(key, priced)
        return priced

    def clear(self) -> None:
        self._entries.clear()
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)
