from typing import Literal

from pydantic import BaseModel, Field


class Health(BaseModel):
    status: Literal["ok"]
    database: Literal["ok"]


class Version(BaseModel):
    version: str = Field(description="autopar package version.")
    api: Literal["v1"] = "v1"
    database_backend: str = Field(description="sqlite or postgresql.")
    schema_revision: str | None = Field(description="Alembic revision the database is at.")
    schema_head: str | None = Field(description="Newest revision this version ships.")
