"""A scenario run over PostgreSQL starts from empty tables, as over a new
.duckdb file: a schema that already holds fanoutsim's tables (an earlier run's,
a served database's) is refused in one line naming the schema and what to do,
before anything is written, while the wall-clock processes that open a
database on purpose (``serve``, a ``Realtime``) still open it. A schema the
URI's search_path names and that does not exist is one line saying to create
it, with nothing created."""

from __future__ import annotations

import threading
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from pgfixtures import drop_schema, new_schema

import fanoutsim as fs
from fanoutsim.cli import main
from fanoutsim.designs.stores import StoreError
from fanoutsim.scenario import ScenarioError, load_scenario

ROOT = Path(__file__).resolve().parents[1]
REALTIME = str(ROOT / "fanoutsim" / "examples" / "realtime.toml")


def schema_of(url: str) -> str:
    options = psycopg.conninfo.conninfo_to_dict(url)["options"]
    assert isinstance(options, str) and options.startswith("-csearch_path=")
    return options.removeprefix("-csearch_path=")


def with_schema(dsn: str, schema: str) -> str:
    return dsn + ("&" if "?" in dsn else "?") + "options=" + quote(f"-csearch_path={schema}")


def snapshot(url: str) -> dict[str, list[str]]:
    """Every row of every table in the URI's schema, as text: what a refusal must leave as it is."""
    schema = schema_of(url)
    with psycopg.connect(url) as con:
        tables = [
            r[0]
            for r in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", [schema]
            ).fetchall()
        ]
        return {
            t: sorted(str(r[0]) for r in con.execute(f'SELECT x::text FROM "{schema}"."{t}" x').fetchall())
            for t in tables
        }


def run(url: str, out: Path, *extra: str) -> int:
    return main(["run", REALTIME, "--until", "2", "--store", url, "--out", str(out), *extra])


def serve_once(url: str) -> int:
    """``fanoutsim serve`` over ``url`` in this process, stopped as soon as it serves."""
    from fanoutsim import serve as srv

    stop = threading.Event()
    return srv.serve(url, load_scenario(REALTIME), ready=lambda port: stop.set(), stop_event=stop)


def one_line(capsys) -> str:
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("fanoutsim: error: "), (out, err)
    return lines[0]


def refused_words(schema: str) -> tuple[str, ...]:
    return (
        f"schema {schema} ",
        "already holds fanoutsim's tables (a run of the reactor design)",
        "a scenario starts from empty tables",
        "CREATE SCHEMA name;",
        "options=-csearch_path%3Dname",
        f"drop fanoutsim's tables in {schema}",
    )


@pytest.mark.parametrize("seed", ["0", "1"])  # the same seed hit a duplicate key, another mixed two runs
def test_a_second_scenario_run_into_one_schema_is_refused_and_writes_nothing(pg_url, tmp_path, capsys, seed):
    url = pg_url()
    assert run(url, tmp_path / "first") == 0
    capsys.readouterr()
    before = snapshot(url)
    assert before["fanoutsim_meta"]
    assert run(url, tmp_path / "second", "--seed", seed) == 2
    line = one_line(capsys)
    for words in refused_words(schema_of(url)):
        assert words in line, (words, line)
    assert "run.store" in line and "Traceback" not in line
    assert snapshot(url) == before  # refused before anything was written
    assert not (tmp_path / "second").exists()


def test_the_python_api_refuses_it_too_and_a_new_schema_runs(pg_url):
    scenario = load_scenario(REALTIME)
    url = pg_url()
    scenario.run(until=1.0, store=url).close()
    before = snapshot(url)
    with pytest.raises(ScenarioError) as info:
        scenario.build(seed=1, store=url)
    for words in refused_words(schema_of(url)):
        assert words in str(info.value), (words, str(info.value))
    assert snapshot(url) == before
    sim = scenario.run(seed=1, until=1.0, store=pg_url())  # a schema of its own: the run is its own
    try:
        assert sim.store.rows("reactor_firings") and sim.store.meta("design") == "reactor"
    finally:
        sim.close()


def test_the_refusal_never_shows_a_password(pg_dsn, pg_url):
    url = pg_url()
    if "postgres:@" not in url:  # the test session's own server trusts its socket: any password goes
        pytest.skip("a server of the user's: its password is not ours to change")
    load_scenario(REALTIME).run(until=1.0, store=url).close()
    with pytest.raises(ScenarioError) as info:
        load_scenario(REALTIME).build(store=url.replace("postgres:@", "postgres:s3cr3t-Pw@"))
    assert "s3cr3t" not in str(info.value) and "password=***" in str(info.value)


def test_a_served_database_is_refused_as_a_scenario_run_and_served_again(pg_url, tmp_path, capsys):
    url = pg_url()
    assert run(url, tmp_path / "first") == 0  # a scenario run, then served: the run goes on there
    for _ in range(2):  # a database opened on purpose is opened again, as often as asked
        assert serve_once(url) == 0
    rt = fs.Realtime(store=url)  # the Python face of serve
    rt.close()
    capsys.readouterr()
    assert run(url, tmp_path / "second") == 2
    assert "already holds fanoutsim's tables" in one_line(capsys)


def test_a_schema_only_served_is_refused_as_a_scenario_run(pg_url, tmp_path, capsys):
    url = pg_url()
    assert serve_once(url) == 0
    capsys.readouterr()
    assert run(url, tmp_path / "out") == 2  # it said "expected 0" of the rows serve wrote
    assert "already holds fanoutsim's tables (a run of the reactor design)" in one_line(capsys)


def test_a_schema_that_does_not_exist_is_one_line_and_nothing_is_created(pg_dsn, tmp_path, capsys):
    schema = new_schema()
    url = with_schema(pg_dsn, schema)
    try:
        assert run(url, tmp_path / "out") == 2
        line = one_line(capsys)
        assert f"schema {schema} does not exist" in line and f"CREATE SCHEMA {schema};" in line, line
        assert "password" not in line or "password=***" in line
        for opened in (lambda: fs.Realtime(store=url), lambda: fs.Simulation(store=url)):  # serve's, the API's
            with pytest.raises(StoreError, match=f"schema {schema} does not exist"):
                opened()
        with psycopg.connect(pg_dsn) as con:
            found = con.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", [schema]).fetchone()
        assert found == (0,)
    finally:
        drop_schema(pg_dsn, schema)


def test_a_search_path_of_no_schema_at_all_says_so(pg_dsn):
    url = pg_dsn + ("&" if "?" in pg_dsn else "?") + "options=" + quote("-csearch_path=")
    with pytest.raises(StoreError, match="names no schema"):
        fs.Simulation(store=url)
