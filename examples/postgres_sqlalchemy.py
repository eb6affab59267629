"""Transactional enqueue with SQLAlchemy: the Session's own psycopg connection carries the
message, so it commits (or rolls back) with the Session's rows.

Needs a PostgreSQL server (``TICKWORK_BACKEND=postgresql://user:pass@host/db``) and
SQLAlchemy 2 with the ``postgresql+psycopg`` dialect::

    python -m examples.postgres_sqlalchemy
    tickwork worker -A examples.postgres_sqlalchemy --burst
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

from sqlalchemy import String, create_engine, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from tickwork import App

URL = os.environ.get("TICKWORK_BACKEND", "postgresql://localhost/tickwork")
app = App(URL)


class Base(DeclarativeBase):
    pass


class Signup(Base):
    __tablename__ = "signups"
    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(200))


@app.task
def send_welcome(signup_id: int) -> None:
    print(f"  -> welcome mail for signup {signup_id}", flush=True)


def sign_up(session: Session, email: str) -> int:
    """Add the signup and enqueue its welcome mail in the Session's transaction."""
    signup = Signup(email=email)
    session.add(signup)
    session.flush()  # the row gets its id
    psycopg_connection = session.connection().connection.driver_connection
    with app.transaction(psycopg_connection):
        send_welcome.delay(signup.id)
    return signup.id


def main() -> None:
    parts = urlsplit(URL)
    engine = create_engine(urlunsplit(parts._replace(scheme="postgresql+psycopg", query="")))
    Base.metadata.create_all(engine)
    with Session(engine) as session:
        kept = sign_up(session, "ada@example.com")
        session.commit()
        print("signed up", kept, "- its welcome mail is queued")
    with Session(engine) as session:
        dropped = sign_up(session, "bob@example.com")
        session.rollback()
        print("rolled back signup", dropped, "- nothing queued for it")
    with Session(engine) as session:
        emails = session.scalars(select(Signup.email)).all()
    print("signups:", list(emails), "messages waiting:", app.queues.stats("default")[0].pending)
    engine.dispose()


if __name__ == "__main__":
    main()
