"""PostgreSQL for the tests: one server per test session, one schema per store.

The server is a throwaway one of the test session's own
(:class:`fanoutsim.kernel.pg.EmbeddedServer`, the ``postgres`` extra that
``make setup`` installs), or the one ``FANOUTSIM_TEST_POSTGRES`` names (a
``postgresql://`` URI). A test that needs PostgreSQL and cannot have it is
skipped with the reason, and fails instead when ``CI`` is set: in CI these
tests never skip.

``pg_store()`` opens a :class:`~fanoutsim.designs.stores.PostgresStore` in a
new schema of that server, dropped at the end of the test; ``pg_url()`` gives
the DSN of a new schema (its ``search_path``), which a child process can open
from the DSN alone.
"""

from __future__ import annotations

import itertools
import os
from urllib.parse import quote

import pytest

ENV = "FANOUTSIM_TEST_POSTGRES"
_schemas = itertools.count(1)


def _unavailable(reason: str):
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"PostgreSQL is needed and unavailable in CI: {reason}")
    pytest.skip(f"PostgreSQL unavailable: {reason}")


@pytest.fixture(scope="session")
def pg_dsn():
    """A PostgreSQL server for the whole session: its DSN."""
    dsn = os.environ.get(ENV)
    if dsn:
        yield dsn
        return
    try:
        from fanoutsim.kernel.pg import EmbeddedServer, ServerError
    except ImportError as exc:  # psycopg or pgserver missing
        _unavailable(str(exc))
    try:
        server = EmbeddedServer()
    except ServerError as exc:
        _unavailable(str(exc))
    yield server.dsn
    server.close()


def new_schema() -> str:
    return f"fs_test_{os.getpid()}_{next(_schemas)}"


def drop_schema(dsn: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def pg_store(pg_dsn):
    """``pg_store()``: a new PostgresStore of every design's tables in a schema of its own."""
    from fanoutsim.designs.stores import PostgresStore

    made = []

    def make(schema: str | None = None):
        store = PostgresStore(pg_dsn, schema=schema or new_schema())
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()
    for schema in {s.schema for s in made}:
        drop_schema(pg_dsn, schema)


@pytest.fixture
def pg_url(pg_dsn):
    """``pg_url()``: the DSN of a new, empty schema (dropped at teardown)."""
    made = []

    import psycopg

    def make() -> str:
        schema = new_schema()
        with psycopg.connect(pg_dsn, autocommit=True) as con:
            con.execute(f'CREATE SCHEMA "{schema}"')
        made.append(schema)
        return pg_dsn + ("&" if "?" in pg_dsn else "?") + "options=" + quote(f"-csearch_path={schema}")

    yield make
    for schema in made:
        drop_schema(pg_dsn, schema)
