"""``fanoutsim pg start|url|stop``: an embedded PostgreSQL several processes
share, started by one command and living on after it, reachable at the URI
``url`` prints, and stopped with nothing left running."""

from __future__ import annotations

import os
import re

import pytest
from clitools import cli, one_error_line


def _running(folder: str) -> list[int]:
    """The processes alive (not zombies) whose command line names ``folder``."""
    import psutil

    out = []
    for proc in psutil.process_iter(attrs=["pid", "cmdline", "status"]):
        if proc.info["status"] != psutil.STATUS_ZOMBIE and folder in " ".join(proc.info["cmdline"] or ()):
            out.append(proc.info["pid"])
    return out


def test_start_url_connects_and_stop_leaves_nothing_running(tmp_path):
    pytest.importorskip("pgserver")
    import psycopg

    folder = str(tmp_path / "pg")
    started = cli("pg", "start", "--dir", folder)
    assert started.returncode == 0, started.stderr
    url = started.stdout.strip()
    said = started.stderr.splitlines()  # the seconds of initdb and start are not silent ones
    assert said[0] == f"fanoutsim: starting the shared PostgreSQL (pgserver) in {folder} ..."
    assert re.fullmatch(r"fanoutsim: PostgreSQL \d+(\.\d+)* ready in \d+\.\d s", said[1]), said
    try:
        kept = cli("pg", "start", "--dir", folder)
        assert kept.stdout.strip() == url and "starting" not in kept.stderr  # one runs: kept
        again = cli("pg", "url", "--dir", folder)
        assert again.returncode == 0 and again.stdout.strip() == url
        with psycopg.connect(url, autocommit=True) as con:  # from another process than start's
            assert con.execute("SELECT 1").fetchone()[0] == 1
        assert _running(folder)  # on after start returned
    finally:
        stopped = cli("pg", "stop", "--dir", folder)
    assert stopped.returncode == 0, stopped.stderr
    assert _running(folder) == []  # nothing runs (a zombie waits for init)
    one_error_line(cli("pg", "url", "--dir", folder), "no embedded PostgreSQL runs in", "fanoutsim pg start")
    one_error_line(cli("pg", "stop", "--dir", folder), "nothing to stop")
    assert os.path.isfile(os.path.join(folder, "PG_VERSION"))  # its data stays for the next start


def test_serve_help_says_what_changes_over_postgresql():
    shown = cli("serve", "--help").stdout
    for words in ("FILE.serve.json", "token", "Over PostgreSQL", "no sidecar", "--role", "who", "fanoutsim pg start"):
        assert words in " ".join(shown.split()), words


def test_serve_help_lists_every_design_s_roles():
    shown = " ".join(cli("serve", "--help").stdout.split())
    for words in (
        "reactor: poller, executor, prune, writers",
        "outbox: dispatcher, consumers, retention, writers",
        "leases: clients, recovery, retention, publishers",
    ):
        assert words in shown, words


def test_a_run_over_a_private_postgres_says_it_starts_one_and_when_it_answers(tmp_path):
    pytest.importorskip("pgserver")
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        'name = "tiny"\n[run]\nuntil = 2.0\n[[workflows]]\nname = "audit"\nduration = 0.01\n'
        '[[subscriptions]]\nreactor = "r"\nworkflow = "audit"\n'
    )
    done = cli("run", str(scenario), "--store", "postgres", "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "PostgreSQL" in line]
    assert re.fullmatch(r"fanoutsim: starting a private PostgreSQL \(pgserver\) in \S+ \.\.\.", said[0]), said
    assert re.fullmatch(r"fanoutsim: PostgreSQL \d+(\.\d+)* ready in \d+\.\d s", said[1]), said
    assert "postgresql://" not in done.stderr  # its address (and any password) is not printed


def test_a_private_postgres_started_from_python_says_nothing(capfd):
    """Off by default: a notebook's or a test's output stays its own."""
    pytest.importorskip("pgserver")
    from fanoutsim.kernel.pg import EmbeddedServer

    with EmbeddedServer():
        pass
    assert capfd.readouterr() == ("", "")
