"""Migrations with data in the database: rows written at every revision (with that revision's
columns, in plain Core, as the code of the time wrote them) survive every upgrade to head, and
each downgrade by one step keeps every row of the tables the older revision has.

The rows are generated from the reflected schema: one per table and revision, each column given
a value of its type, each foreign key pointing at the row of its parent table.
"""

from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from alembic.script import ScriptDirectory
from sqlalchemy import (
    JSON,
    Boolean,
    Connection,
    DateTime,
    Float,
    Integer,
    MetaData,
    Numeric,
    String,
    Table,
    Text,
    insert,
    select,
)
from sqlalchemy.dialects.postgresql import JSONB

from app.db import make_engine
from app.migrate import VERSION_TABLE, alembic_config, migrate_to

Rows = dict[str, dict[str, dict[str, Any]]]  # table -> primary key -> column -> value
MOMENT = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


def revisions() -> list[str]:
    script = ScriptDirectory.from_config(alembic_config())
    return [rev.revision for rev in reversed(list(script.walk_revisions()))]


def our_tables(connection: Connection) -> list[Table]:
    metadata = MetaData()
    metadata.reflect(connection)
    # Parents first; not the version tables (ours, and Optuna's when it shares the database).
    return [t for t in metadata.sorted_tables if t.name not in {VERSION_TABLE, "alembic_version"}]


def value_for(table: Table, column: Any, tag: str, parents: dict[str, dict[str, Any]]) -> Any:
    for key in column.foreign_keys:
        parent = parents.get(key.column.table.name)
        if parent is not None:
            return parent[key.column.name]
    kind = column.type
    if isinstance(kind, JSON | JSONB):
        return {"tag": tag, "column": column.name, "list": [1, 2.5, "x"]}
    if isinstance(kind, Boolean):
        return False  # e.g. is_preset: a user's row
    if isinstance(kind, DateTime):
        return MOMENT
    if isinstance(kind, Integer):
        return 7
    if isinstance(kind, Float | Numeric):
        return 1.25
    if isinstance(kind, String | Text):
        length = getattr(kind, "length", None) or 200
        return f"{tag}{table.name[:6]}{column.name[:6]}"[:length]
    raise AssertionError(f"{table.name}.{column.name}: no value for type {kind!r}")


def write_rows(connection: Connection, tag: str) -> Rows:
    """One row in every table there is, all values set; what was written."""
    written: Rows = {}
    parents: dict[str, dict[str, Any]] = {}
    for table in our_tables(connection):
        row = {column.name: value_for(table, column, tag, parents) for column in table.columns}
        connection.execute(insert(table), [row])
        parents[table.name] = row
        written[table.name] = {_key(table, row): row}
    return written


def _key(table: Table, row: dict[str, Any]) -> str:
    return "/".join(str(row[column.name]) for column in table.primary_key.columns)


def _same(stored: Any, wrote: Any) -> bool:
    if isinstance(wrote, datetime) and isinstance(stored, datetime):
        stored = stored if stored.tzinfo else stored.replace(tzinfo=UTC)
        return stored == wrote
    if isinstance(stored, Decimal):
        stored = float(stored)
    return bool(stored == wrote)


def assert_kept(connection: Connection, expected: Rows, when: str, *, values: bool = True) -> None:
    """Every row of ``expected`` whose table still exists is there, every column that still
    exists holding what was written (``values``; a column a downgrade dropped comes back
    empty)."""
    tables = {table.name: table for table in our_tables(connection)}
    for name, rows in expected.items():
        if name not in tables:
            continue  # a table the older revision does not have: dropped with it
        table = tables[name]
        stored = {
            _key(table, row._asdict()): row._asdict() for row in connection.execute(select(table))
        }
        for key, wrote in rows.items():
            assert key in stored, f"{when}: {name} row {key} lost"
            if not values:
                continue
            changed = {
                column: (stored[key][column], value)
                for column, value in wrote.items()
                if column in stored[key] and not _same(stored[key][column], value)
            }
            assert not changed, f"{when}: {name} row {key} changed: {changed}"


def merge(into: Rows, more: Rows) -> None:
    for table, rows in more.items():
        into.setdefault(table, {}).update(rows)


def test_every_revision_upgrades_and_downgrades_with_data(
    make_empty_database: Callable[[], str],
) -> None:
    url = make_empty_database()
    chain = revisions()
    engine = make_engine(url)
    expected: Rows = {}
    try:
        for index, revision in enumerate(chain):
            migrate_to(url, revision)
            with engine.begin() as connection:
                assert_kept(connection, expected, f"upgrade to {revision}")
                merge(expected, write_rows(connection, f"r{index}"))
        # Down one step at a time, to the first revision: the rows of the older tables stay.
        for index in range(len(chain) - 1, 0, -1):
            migrate_to(url, chain[index - 1], down=True)
            with engine.begin() as connection:
                assert_kept(connection, expected, f"downgrade {chain[index]} -> {chain[index - 1]}")
        # And up again to head, with what the first revision's tables kept.
        with engine.connect() as connection:
            present = {table.name for table in our_tables(connection)}
        kept = {name: rows for name, rows in expected.items() if name in present}
        migrate_to(url, chain[-1])
        with engine.begin() as connection:
            assert_kept(connection, kept, "upgrade to head again", values=False)
    finally:
        engine.dispose()
