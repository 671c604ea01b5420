"""``autopar keys``: create, list and revoke API keys in the service's database.

An administrator's command: it writes to the database directly (``--database-url`` or
``AUTOPAR_DATABASE_URL``), so whoever can run it can already read every tenant's rows. The first
key created turns access control on for the whole server.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.cli import cli
from app.cli._common import fail
from costmodel.errors import format_validation_error

keys = typer.Typer(
    help="API keys: each names a tenant; only a hash is stored.", no_args_is_help=True
)
cli.add_typer(keys, name="keys")

DatabaseOption = Annotated[
    str | None,
    typer.Option(help="The service's database. Default: AUTOPAR_DATABASE_URL or ./autopar.db."),
]


@contextmanager
def _session(database_url: str | None) -> Iterator[Session]:
    from app.db import make_engine
    from app.migrate import upgrade_to_head
    from app.settings import Settings

    try:
        settings = Settings()
    except ValidationError as exc:
        fail(format_validation_error(exc, prefix="AUTOPAR"))
    engine = make_engine(database_url or settings.database_url)
    try:
        upgrade_to_head(engine)
        with Session(engine, expire_on_commit=False) as session:
            yield session
    except SQLAlchemyError as exc:
        fail(f"database: {exc.__class__.__name__}: {str(exc).splitlines()[0]}")
    finally:
        engine.dispose()


@keys.command("create")
def create_command(
    tenant: Annotated[str, typer.Option(help="Tenant the key acts for (its rows, its searches).")],
    name: Annotated[str | None, typer.Option(help="Label, e.g. who or what uses it.")] = None,
    searches_per_minute: Annotated[
        int | None,
        typer.Option(min=1, help="Searches it may submit per minute. Default: the server's."),
    ] = None,
    database_url: DatabaseOption = None,
) -> None:
    """Create a key and print its token once (it cannot be shown again)."""
    from app.auth import ApiKeyError, create_key

    with _session(database_url) as session:
        try:
            row, token = create_key(
                session, tenant=tenant, name=name, searches_per_minute=searches_per_minute
            )
        except ApiKeyError as exc:
            fail(str(exc))
    print(token)
    typer.echo(
        f"key {row.id} ({row.prefix}...) for tenant '{row.tenant}'; send it as "
        "'Authorization: Bearer <token>'. It is not stored in clear and cannot be shown again.",
        err=True,
    )


@keys.command("list")
def list_command(
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's keys.")] = None,
    database_url: DatabaseOption = None,
) -> None:
    """Every key: id, displayed prefix, tenant, name, limit, created, revoked."""
    from app.auth import list_keys

    with _session(database_url) as session:
        rows = list_keys(session, tenant=tenant)
    print(f"{'id':<32}  {'prefix':<11}  {'tenant':<16}  {'name':<16}  {'per min':>7}  state")
    for row in rows:
        state = f"revoked {row.revoked_at:%Y-%m-%d %H:%M}" if row.revoked_at else "active"
        limit = str(row.searches_per_minute) if row.searches_per_minute else "default"
        print(
            f"{row.id:<32}  {row.prefix:<11}  {row.tenant:<16}  {row.name or '':<16}  "
            f"{limit:>7}  {state}"
        )


@keys.command("revoke")
def revoke_command(
    key: Annotated[str, typer.Argument(help="The key's id or displayed prefix.")],
    database_url: DatabaseOption = None,
) -> None:
    """Revoke a key: refused (401) by every API process from its next request."""
    from app.auth import ApiKeyError, revoke_key

    with _session(database_url) as session:
        try:
            row = revoke_key(session, key=key)
        except ApiKeyError as exc:
            fail(str(exc))
    print(f"revoked {row.id} ({row.prefix}...) of tenant '{row.tenant}'")
