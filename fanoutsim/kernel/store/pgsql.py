"""The DuckDB SQL of the store parts, as PostgreSQL runs it: a small dialect layer.

Each design writes its statements once, for DuckDB (its ``tables.statements`` module);
:class:`~.postgres.PostgresStore` runs the very same text through
:func:`translate`, so a statement a design adds later works on PostgreSQL too
(and the store contract suite, run on every adapter, says so if it does not).
What differs, and what this module does about it:

* placeholders: DuckDB's ``?`` becomes psycopg's ``%s`` outside quoted text,
  and every literal ``%`` becomes ``%%``;
* timestamps: the tables keep ``TIMESTAMPTZ`` and the interface epoch
  microseconds, read by ``epoch_us(col)`` and written by
  ``make_timestamp(CAST(? AS BIGINT))``. PostgreSQL has neither function with
  that signature, so :data:`FUNCTIONS` defines both (exact to the microsecond
  over years 1 to 9999, by integer arithmetic; the session runs in UTC);
* types: ``BLOB`` is ``BYTEA``, ``DOUBLE`` is ``DOUBLE PRECISION``, and a
  ``VARCHAR`` column of a table is ``VARCHAR COLLATE "C"``, so text orders by
  code point as in DuckDB and the memory store, whatever the database's locale;
* ``INSERT OR REPLACE INTO t [(cols)] VALUES ...`` becomes
  ``INSERT ... ON CONFLICT (primary key) DO UPDATE SET`` every other column
  given (and ``INSERT OR IGNORE`` ``ON CONFLICT DO NOTHING``); the primary key
  and the columns come from the catalog (``table_info``), so the statement
  needs no second copy either.

Everything else — ``RETURNING``, ``::VARCHAR``, ``CAST(? AS UUID)``, window
functions, ``ADD COLUMN IF NOT EXISTS`` — is SQL both engines read alike. A
subquery in ``FROM`` without an alias needs PostgreSQL 16, which the store
requires.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# epoch microseconds <-> TIMESTAMPTZ. Integer arithmetic: seconds and the
# microseconds left over are added as two intervals, each product exact in the
# double that interval multiplication uses (a whole second count times 10^6 is a
# multiple of 64, so exact up to 2^59 microseconds); extract(epoch) is numeric,
# exact, since PostgreSQL 14. STABLE (the time-zone casts are), so they inline.
FUNCTIONS = (
    """CREATE OR REPLACE FUNCTION epoch_us(t TIMESTAMPTZ) RETURNS BIGINT
    LANGUAGE sql STABLE PARALLEL SAFE AS
    $$ SELECT (extract(epoch FROM t) * 1000000)::BIGINT $$""",
    """CREATE OR REPLACE FUNCTION epoch_us(t TIMESTAMP) RETURNS BIGINT
    LANGUAGE sql STABLE PARALLEL SAFE AS
    $$ SELECT (extract(epoch FROM t) * 1000000)::BIGINT $$""",
    """CREATE OR REPLACE FUNCTION make_timestamp(us BIGINT) RETURNS TIMESTAMP
    LANGUAGE sql STABLE PARALLEL SAFE AS
    $$ SELECT TIMESTAMP '1970-01-01' + (us / 1000000) * INTERVAL '1 second'
                                     + (us % 1000000) * INTERVAL '1 microsecond' $$""",
)

# one piece of a statement: a quoted string, a quoted name, a dollar-quoted body,
# a comment, or code
_PIECES = re.compile(r"""('(?:[^']|'')*')|("(?:[^"]|"")*")|(\$\$.*?\$\$)|(--[^\n]*)|([^'"$-]+|.)""", re.S)
_DDL = re.compile(r"^\s*(CREATE\s+TABLE|ALTER\s+TABLE)\b", re.I)
_UPSERT = re.compile(r"^\s*INSERT\s+OR\s+(REPLACE|IGNORE)\s+INTO\s+(\w+)\s*(?:\(([^)]*)\))?", re.I)
_MAIN = re.compile(r"\bmain\.")
_RETURNING = re.compile(r"\bRETURNING\b", re.I)
_TYPES = [
    (re.compile(r"\bBLOB\b", re.I), "BYTEA"),
    (re.compile(r"\bDOUBLE\b(?!\s+PRECISION)", re.I), "DOUBLE PRECISION"),
]
_VARCHAR = re.compile(r"\bVARCHAR\b(?!\s*\()", re.I)

TableInfo = Callable[[str], "tuple[tuple[str, ...], tuple[str, ...]]"]


def split(script: str) -> list[str]:
    """A script's statements (split at ``;`` outside quotes), without empty ones."""
    out, cur = [], []
    for m in _PIECES.finditer(script):
        text = m.group(0)
        if m.group(5) is not None and ";" in text:
            parts = text.split(";")
            cur.append(parts[0])
            for part in parts[1:]:
                out.append("".join(cur))
                cur = [part]
        else:
            cur.append(text)
    out.append("".join(cur))
    return [s.strip() for s in out if s.strip()]


def _code(statement: str, fn: Callable[[str], str]) -> str:
    """``statement`` with ``fn`` applied to its code; in quoted text and comments
    only ``%`` is doubled (psycopg reads placeholders everywhere)."""
    return "".join(
        fn(m.group(0)) if m.group(5) is not None else m.group(0).replace("%", "%%") for m in _PIECES.finditer(statement)
    )


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def translate(statement: str, table_info: TableInfo | None = None, home: str | None = None) -> str:
    """One DuckDB statement as PostgreSQL (psycopg's ``%s`` placeholders) runs it.
    ``table_info(table)`` gives a table's columns and primary key, for
    ``INSERT OR REPLACE``; ``home`` is the schema that DuckDB's ``main.``
    names (the store's own, whatever the search path is at the time)."""
    ddl = bool(_DDL.match(statement))

    def code(text: str) -> str:
        text = text.replace("%", "%%").replace("?", "%s")
        if home is not None:
            text = _MAIN.sub(_quote(home) + ".", text)
        for pattern, repl in _TYPES:
            text = pattern.sub(repl, text)
        if ddl:
            text = _VARCHAR.sub('VARCHAR COLLATE "C"', text)
        return text

    out = _code(statement, code)
    m = _UPSERT.match(out)
    if m:
        mode, table, cols = m.group(1).upper(), m.group(2), m.group(3)
        head = f"INSERT INTO {table}" + (f" ({cols})" if cols else "")
        body = out[m.end() :]
        if mode == "IGNORE":
            conflict = " ON CONFLICT DO NOTHING"
        else:
            if table_info is None:
                raise ValueError(f"INSERT OR REPLACE INTO {table} needs the table's primary key")
            columns, key = table_info(table)
            given = [c.strip().strip('"') for c in cols.split(",")] if cols else list(columns)
            rest = [c for c in given if c not in key]
            sets = ", ".join(f"{_quote(c)} = EXCLUDED.{_quote(c)}" for c in rest)
            target = ", ".join(_quote(c) for c in key)
            conflict = f" ON CONFLICT ({target}) " + (f"DO UPDATE SET {sets}" if rest else "DO NOTHING")
        r = _RETURNING.search(body)
        if r:
            body = body[: r.start()].rstrip() + conflict + " " + body[r.start() :]
        else:
            body = body.rstrip().rstrip(";") + conflict
        out = head + " " + body.lstrip()
    return out
