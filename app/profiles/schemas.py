from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.common.pagination import PageMeta
from costmodel.observations import CollectiveOp, Profile
from costmodel.specs import GpuSpec

ProfileKind = Literal["measured", "nccl-tests"]
# One nccl-tests run prints a few KB; the request body limit bounds the total anyway.
NcclOutput = Annotated[str, Field(min_length=1, max_length=4_000_000)]


class NcclTestsImport(BaseModel):
    """nccl-tests output as it was printed (``all_reduce_perf -b 8 -e 8G -f 2 -g 8`` ...)."""

    model_config = ConfigDict(extra="forbid")

    outputs: list[NcclOutput] = Field(min_length=1, max_length=50, description="One per run.")
    gpu: GpuSpec | Annotated[str, Field(min_length=1, max_length=200)] | None = Field(
        default=None,
        description="Catalog GPU name or inline spec; default: the GPU the rank lines name.",
    )
    op: CollectiveOp | None = Field(
        default=None, description="Override the collective (a bare table has no preamble)."
    )
    ranks: int | None = Field(default=None, ge=2, le=1_000_000, description="Override.")
    ranks_per_node: int | None = Field(default=None, ge=1, le=1_000_000, description="Override.")


class ProfileCreate(BaseModel):
    """Exactly one of ``profile`` (what ``autopar profile`` wrote) or ``nccl_tests``."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(
        default=None, min_length=1, max_length=200, description="Default: the profile's name."
    )
    profile: Profile | None = None
    nccl_tests: NcclTestsImport | None = None


class SampleCounts(BaseModel):
    gemm: int
    memory: int
    attention: int
    collectives: int


class ProfileSummary(BaseModel):
    id: str
    name: str
    kind: ProfileKind
    device: str = Field(description="The measured device as its driver names it.")
    gpu: str = Field(description="The GpuSpec the cost model prices it as.")
    samples: SampleCounts
    created_at: datetime


class ProfileRecord(ProfileSummary):
    profile: Profile


class ProfilePage(PageMeta):
    items: list[ProfileSummary]
