"""Turn nccl-tests output (``all_reduce_perf`` and friends) into a ``Profile``: shared by
``autopar profile --nccl-tests`` and ``POST /v1/profiles``."""

from collections.abc import Sequence

from costmodel.observations import CollectiveOp, CollectiveSample, DeviceInfo, Profile
from costmodel.specs import GpuSpec
from profiler.catalog_match import match_catalog
from profiler.nccl_tests import NcclTestsError, nccl_tests_device, parse_nccl_tests


class NcclImportError(ValueError):
    """What is wrong, and with which input (``index`` of the output, or None: all of them)."""

    def __init__(self, reason: str, *, index: int | None = None, field: str = "outputs") -> None:
        super().__init__(reason)
        self.reason = reason
        self.index = index
        self.field = field


def profile_from_nccl_tests(
    outputs: Sequence[str],
    *,
    gpu: GpuSpec | None = None,
    op: CollectiveOp | None = None,
    ranks: int | None = None,
    ranks_per_node: int | None = None,
    name: str | None = None,
    origin: str = "nccl-tests output",
) -> Profile:
    """One profile of every results table in ``outputs``. ``gpu`` is the device the model
    should price; without it the GPU the rank lines name must be in the catalog."""
    samples: list[CollectiveSample] = []
    device_names: set[str] = set()
    for index, text in enumerate(outputs):
        try:
            samples.extend(
                parse_nccl_tests(text, op=op, ranks=ranks, ranks_per_node=ranks_per_node)
            )
        except NcclTestsError as exc:
            raise NcclImportError(str(exc), index=index) from None
        if reported := nccl_tests_device(text):
            device_names.add(reported)
    device_name = device_names.pop() if len(device_names) == 1 else None
    if gpu is None:
        gpu = match_catalog(device_name) if device_name else None
        if gpu is None:
            seen = f"'{device_name}' is not in the catalog" if device_name else "no GPU name found"
            raise NcclImportError(f"give the GPU (catalog name or spec): {seen}", field="gpu")
    first = samples[0]
    return Profile(
        name=name or f"nccl-tests-{gpu.name}",
        device=DeviceInfo(
            name=device_name or gpu.name,
            kind="cuda",
            ranks=first.ranks,
            ranks_per_node=first.ranks_per_node,
            backend="nccl",
        ),
        gpu=gpu,
        software={"nccl-tests": "imported"},
        settings={"imported_from": origin},
        collectives=samples,
    )
