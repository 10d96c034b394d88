"""PostgreSQL errors, worded one way for every command and never carrying a
password: a URI that cannot be parsed (a non-numeric port included) is
"malformed PostgreSQL URI: <what is wrong>", a server that does not answer
"cannot reach PostgreSQL at <the URI, password=***>"; the Python exception
says the same, with no secret in its text, its chain or its traceback."""

from __future__ import annotations

import socket
import traceback
from pathlib import Path

import pytest

import fanoutsim as fs
from fanoutsim.cli import main
from fanoutsim.designs.stores import StoreError
from fanoutsim.kernel.store.postgres import mask_secrets

ROOT = Path(__file__).resolve().parents[1]
SECRET = "s3cr3t-Pw"
MALFORMED = f"postgresql://u:{SECRET}@[::1/db"  # an IPv6 host never closed
BAD_PORT = f"postgresql://u:{SECRET}@localhost:abc/db"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


UNREACHABLE = f"postgresql://u:{SECRET}@127.0.0.1:{_closed_port()}/db?connect_timeout=2"

COMMANDS = {
    "run": lambda uri, tmp: [
        "run",
        str(ROOT / "fanoutsim" / "examples" / "default.toml"),
        "--until",
        "1",
        "--store",
        uri,
        "--out",
        str(tmp / "out"),
    ],
    "serve": lambda uri, tmp: [
        "serve",
        "--store",
        uri,
        "--scenario",
        str(ROOT / "fanoutsim" / "examples" / "realtime.toml"),
    ],
    "status": lambda uri, tmp: ["status", "--store", uri],
    "write": lambda uri, tmp: ["write", "--store", uri, "--design", "outbox", "page=a", "body=b"],
}


def one_line(capsys) -> str:
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and len(lines) == 1 and lines[0].startswith("fanoutsim: error: "), (out, err)
    assert SECRET not in err
    return lines[0]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_malformed_uri_is_named_so_with_its_password_masked(tmp_path, capsys, command):
    assert main(COMMANDS[command](MALFORMED, tmp_path)) == 2
    line = one_line(capsys)
    assert line.startswith("fanoutsim: error: malformed PostgreSQL URI: ") and "u:***@" in line, line


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_non_numeric_port_is_a_malformed_uri_not_a_failed_lookup(tmp_path, capsys, command):
    assert main(COMMANDS[command](BAD_PORT, tmp_path)) == 2
    line = one_line(capsys)
    assert line.startswith("fanoutsim: error: malformed PostgreSQL URI: port 'abc' is not a number"), line


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_server_that_does_not_answer_cannot_be_reached(tmp_path, capsys, command):
    assert main(COMMANDS[command](UNREACHABLE, tmp_path)) == 2
    line = one_line(capsys)
    assert line.startswith("fanoutsim: error: cannot reach PostgreSQL at ") and "password=***" in line, line


@pytest.mark.parametrize("uri", [MALFORMED, BAD_PORT, UNREACHABLE], ids=["malformed", "bad-port", "unreachable"])
def test_the_exception_carries_no_password(uri):
    with pytest.raises(StoreError) as info:
        fs.Simulation(store=uri)
    shown = "".join(traceback.format_exception(info.value))
    assert SECRET not in shown and SECRET not in repr(info.value.args)
    assert info.value.__cause__ is None and (info.value.__context__ is None or info.value.__suppress_context__)


def test_mask_secrets_masks_every_form_a_password_takes():
    text = (
        f'URI: "postgresql://u:{SECRET}@h/db" and postgres://:{SECRET}@h and password={SECRET} '
        f"and password='{SECRET} x' host=h"
    )
    masked = mask_secrets(text)
    assert SECRET not in masked and masked.count("***") == 4 and "host=h" in masked
    assert mask_secrets("postgresql://u@h/db") == "postgresql://u@h/db"  # no password: as it is


def test_only_a_gone_connection_counts_as_lost_not_a_deadlock():
    """serve ends in one line on a lost database; a deadlock or a serialization
    failure (OperationalErrors too) ends one transaction and must not stop it."""
    import psycopg
    from psycopg import errors as pg_errors

    from fanoutsim.kernel.store.postgres import connection_lost

    assert connection_lost(psycopg.OperationalError("the connection is lost"))
    assert connection_lost(pg_errors.AdminShutdown("terminating connection due to administrator command"))
    assert not connection_lost(pg_errors.DeadlockDetected("deadlock detected"))
    assert not connection_lost(pg_errors.SerializationFailure("could not serialize access"))
    assert not connection_lost(ValueError("not a database error"))
