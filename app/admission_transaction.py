"""The transaction a request's API-key check ran in, which its service may go on in.

Admission (``app.auth.access``) reads the key in the session's first transaction and leaves it
open: a read-only service continues in it, on the same pooled connection. A writer cannot (on
SQLite its transaction must begin as a writer, ``app.db.begin_write``), so it ends this one
first -- which is safe only while nothing but the key check ran in it, hence the mark.
"""

from sqlalchemy.orm import Session, SessionTransaction

_KEY = "autopar_admission_transaction"


def mark_admission_transaction(session: Session) -> None:
    """Remember ``session``'s open transaction (if any) as the one only admission used."""
    transaction = session.get_transaction()
    if transaction is not None:
        session.info[_KEY] = transaction


def end_admission_transaction(session: Session) -> bool:
    """End ``session``'s transaction if it is still the one admission left; True if it did."""
    marked: SessionTransaction | None = session.info.pop(_KEY, None)
    if marked is None or marked is not session.get_transaction():
        return False
    session.rollback()
    return True
