"""No password a command was given is ever printed: not in argparse's own
refusals (an unknown flag, a bad value), not where a URI was given as a file,
not where a store is refused; and the hint after a write can be pasted as it
is (a placeholder, not a masked password that would be sent as ``***``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from clitools import cli, one_error_line
from hypothesis import given
from hypothesis import strategies as st

from fanoutsim import cli as command
from fanoutsim.kernel.store.redact import mask_secrets, passwords_in

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


@pytest.mark.parametrize(
    "uri, fragment",
    [
        ("postgresql://u:PW/SECRET@127.0.0.1:1/db", "port 'PW' is not a number"),  # a / in it (base64)
        ("postgres://u:PW@SECRET@127.0.0.1:1/db", "write an @ inside a user name or password as %40"),
        ("postgresql://u:PW SECRET@127.0.0.1:1/db", "unexpected spaces"),  # the driver quotes it alone
        ("postgresql://u:PW%SECRET@127.0.0.1:1/db", "percent-encoded"),
        ("POSTGRESQL://u:PWSECRET@127.0.0.1:1/db", "is not a store"),  # upper case
    ],
)
def test_an_odd_password_in_a_uri_is_never_printed_either(uri, fragment):
    """Passwords a pattern cannot find whole (a / or an @ in them, a driver's
    message quoting one alone): the command masks what it was given."""
    done = cli("status", "--store", uri)
    assert "SECRET" not in done.stdout + done.stderr, done.stderr
    one_error_line(done, fragment)


# printable, no whitespace or quote (a shell word, as a URI's user info holds one)
_PASSWORDS = st.text(st.characters(min_codepoint=33, max_codepoint=126, blacklist_characters="\"'"), min_size=3)


@given(_PASSWORDS)
def test_the_uri_pattern_masks_any_password_however_odd(password):
    """Without the remembered ones, the pattern alone: a URI's password, up to
    its last @, whatever it holds (a /, an @, a :), in any case of the scheme."""
    for scheme in ("postgresql", "postgres", "POSTGRESQL"):
        masked = mask_secrets(f"in {scheme}://me:{password}@db.example:5432/runs: refused")
        assert f"{scheme}://me:***@db.example:5432/runs" in masked
    assert password in passwords_in(f"postgresql://me:{password}@db.example/runs")


def test_a_plain_password_is_left_to_the_patterns_and_garbles_no_message():
    """A password such as "postgres" (a common one) is masked in its URI by the
    pattern; remembered, it would mask every "postgres" a message says."""
    done = cli("status", "--store", "host=127.0.0.1 password=postgres")
    one_error_line(done, "'host=127.0.0.1 password=***' is not a store", "or a postgresql:// URI")
