"""Worker ids that say which process on which host holds a lease, so a worker can tell a dead
process of its own host (its previous incarnation, killed) from a live one, at once, instead of
waiting for the dead one's lease to run out.

An id is ``<hostname>-<pid>-<random>@<host key>``. The host key hashes the kernel's boot id and
the process's PID namespace: two processes share it only when their PIDs name the same
processes, so ``os.kill(pid, 0)`` in one answers for the other. Without ``/proc`` (not Linux)
there is no key, and such workers wait for leases as before.
"""

import hashlib
import os
import secrets
import socket
import threading
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

# Ids of the workers alive in this process: a process sees its own PID alive, so its dead
# previous incarnation with the same PID (PID 1 in a restarted container) is told apart by id.
_LIVE: set[str] = set()
_LIVE_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def host_key() -> str | None:
    try:
        boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        pid_namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    return hashlib.sha256(f"{boot_id}/{pid_namespace}".encode()).hexdigest()[:12]


def new_worker_id() -> str:
    base = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
    key = host_key()
    return f"{base}@{key}" if key else base


def host_suffix() -> str | None:
    """What the ids of this host's workers end with (``None``: no reclaiming here)."""
    key = host_key()
    return f"@{key}" if key else None


def register(worker_id: str) -> None:
    with _LIVE_LOCK:
        _LIVE.add(worker_id)


def unregister(worker_id: str) -> None:
    with _LIVE_LOCK:
        _LIVE.discard(worker_id)


def dead_local_owners(owners: Iterable[str]) -> list[str]:
    """The ``owners`` that are workers of this host whose process is gone."""
    suffix = host_suffix()
    if suffix is None:
        return []
    return [owner for owner in owners if owner.endswith(suffix) and not _alive(owner)]


def _alive(owner: str) -> bool:
    try:
        pid = int(owner.removesuffix(owner[owner.rindex("@") :]).rsplit("-", 2)[1])
    except (ValueError, IndexError):
        return True  # not an id of ours: never presumed dead
    if pid == os.getpid():
        with _LIVE_LOCK:
            return owner in _LIVE
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Killed but not yet reaped by its parent: dead for our purposes."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].startswith("Z")
