from importlib import metadata

from sqlalchemy import text
from sqlalchemy.orm import Session

from app.health.schemas import Health, Version
from app.migrate import current_revision, head_revision


def check_health(session: Session) -> Health:
    # A database that does not answer raises OperationalError, which is a 503 (app.errors).
    session.execute(text("SELECT 1"))
    return Health(status="ok", database="ok")


def version_info(session: Session) -> Version:
    try:
        package_version = metadata.version("autopar")
    except metadata.PackageNotFoundError:  # running from a checkout without installing
        package_version = "unknown"
    connection = session.connection()
    return Version(
        version=package_version,
        database_backend=connection.dialect.name,
        schema_revision=current_revision(connection),
        schema_head=head_revision(),
    )
