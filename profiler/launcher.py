"""Run a function on N local ranks with ``torch.distributed`` (gloo on CPU, NCCL on GPUs).

Each rank is a fresh ``spawn``ed process (CUDA cannot be forked, and a fresh interpreter keeps
thread pools and memory accounting per rank), joined into one process group over a TCP store on
127.0.0.1. Rank 0's return value comes back to the caller; an exception in any rank is raised
here with that rank's traceback (``torch.multiprocessing.ProcessRaisedException``).
"""

import os
import pickle
import socket
import tempfile
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _rank_main(
    rank: int,
    target: Callable[..., Any],
    args: tuple[Any, ...],
    world: int,
    port: int,
    backend: str,
    threads: int | None,
    result_path: str,
) -> None:
    if threads:
        torch.set_num_threads(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(
        backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        result = target(*args)
        if rank == 0:
            # A file, not a pipe: a large result would block a pipe the parent only reads after
            # joining the ranks.
            with open(result_path, "wb") as handle:
                pickle.dump(result, handle)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run_ranks(
    target: Callable[..., Any],
    args: tuple[Any, ...] = (),
    *,
    world: int,
    backend: str,
    threads_per_rank: int | None = None,
) -> Any:
    """``target(*args)`` on ranks 0..world-1 inside one process group; rank 0's result."""
    with tempfile.TemporaryDirectory(prefix="autopar-ranks-") as folder:
        result_path = os.path.join(folder, "rank0.pickle")
        mp.start_processes(
            _rank_main,
            args=(target, args, world, free_port(), backend, threads_per_rank, result_path),
            nprocs=world,
            start_method="spawn",
            join=True,
        )
        if not os.path.exists(result_path):
            raise RuntimeError("rank 0 returned no result")
        with open(result_path, "rb") as handle:
            return pickle.load(handle)
