"""``fanoutsim serve --store URI`` when its PostgreSQL goes away: one line that
says the connection was lost (no password), a non-zero exit, no traceback
from any of its threads."""

from __future__ import annotations

import subprocess
import sys

import pytest
from clitools import ENV, ROOT, cli

REALTIME = str(ROOT / "fanoutsim" / "examples" / "realtime.toml")


def test_serve_says_in_one_line_that_the_database_went_away_and_exits_non_zero(tmp_path):
    pytest.importorskip("pgserver")
    folder = str(tmp_path / "pg")
    started = cli("pg", "start", "--dir", folder)
    assert started.returncode == 0, started.stderr
    # the embedded server trusts its socket's users: a password is taken and not checked, so it shows a leak
    url = started.stdout.strip().replace("postgres:@", "postgres:s3cret@", 1)
    proc = subprocess.Popen(
        [sys.executable, "-m", "fanoutsim", "serve", "--store", url, "--scenario", REALTIME],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        assert proc.stderr is not None
        serving = proc.stderr.readline()  # said once it serves
        assert serving.startswith("serving "), serving + proc.stderr.read()
        stopped = cli("pg", "stop", "--dir", folder)  # a fast shutdown: every client is disconnected
        assert stopped.returncode == 0, stopped.stderr
        status = proc.wait(timeout=60)
        said = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        cli("pg", "stop", "--dir", folder)
    assert status == 2, said
    lines = said.splitlines()
    assert len(lines) == 1, said
    assert lines[0].startswith("fanoutsim: error: lost the connection to the database "), said
    assert "s3cret" not in serving + said
