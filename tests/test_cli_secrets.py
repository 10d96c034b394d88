"""No password a command was given is ever printed: not in argparse's own
refusals (an unknown flag, a bad value), not where a URI was given as a file,
not where a store is refused; and the hint after a write can be pasted as it
is (a placeholder, not a masked password that would be sent as ``***``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from clitools import cli, one_error_line

from fanoutsim import cli as command

SECRET = "S3cretPW"
URI = f"postgresql://u:{SECRET}@127.0.0.1:1/db"
SCENARIO = str(Path(__file__).resolve().parents[1] / "fanoutsim" / "examples" / "default.toml")


@pytest.mark.parametrize(
    "args, fragments",
    [
        # argparse's own message quotes the argument it does not know
        (["sweep", SCENARIO, "--store", URI], ["unrecognized arguments: --store", "postgresql://u:***@"]),
        # a URI where a scenario file goes
        (["run", URI], ["no such scenario file", "postgresql://u:***@127.0.0.1:1/db"]),
        # a libpq key=value DSN, which run --store refuses
        (["run", SCENARIO, "--store", f"host=127.0.0.1 port=1 password={SECRET}"], ["run.store", "password=***"]),
        # a bad value argparse refuses, quoting it
        (["status", "--store", f"password={SECRET}"], ["--store", "is not a store", "password=***"]),
    ],
)
def test_a_refusal_names_the_problem_and_never_the_password(args, fragments):
    done = cli(*args)
    assert SECRET not in done.stdout + done.stderr
    one_error_line(done, *fragments)


def test_the_explain_hint_after_a_write_is_pasteable_and_keeps_the_password_out(capsys):
    command._hint_explain(URI, "f-1")
    err = capsys.readouterr().err
    assert SECRET not in err and "***" not in err
    assert 'fanoutsim explain "$URI" f-1' in err and "password" in err
    # no password (what 'fanoutsim pg start' prints): the URI itself, quoted for the shell
    shared = "postgresql://postgres:@/postgres?host=/tmp/x/pg"
    command._hint_explain(shared, "f-2")
    assert f"fanoutsim explain '{shared}' f-2" in capsys.readouterr().err
    command._hint_explain("run.duckdb", {"seq": 7})
    assert "fanoutsim explain run.duckdb 7" in capsys.readouterr().err
