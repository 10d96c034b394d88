"""``fanoutsim serve`` observed as production is: ``GET /metrics`` for a
Prometheus scraper, a query string parsed, ``status`` saying when the run
falls behind and who served it after a stop, and ``fire`` / ``write`` saying
what to do with the id they print."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from clitools import ENV, ROOT, cli
from conftest import wait_for
from prometheus_client.parser import text_string_to_metric_families

from fanoutsim import serve as srv
from fanoutsim.kernel.metrics import prometheus_text

REALTIME = str(ROOT / "fanoutsim" / "examples" / "realtime.toml")


def start(db: Path, *args: str) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "fanoutsim", "serve", "--db", str(db), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    side = Path(f"{db}.serve.json")
    assert wait_for(lambda: side.exists() and json.loads(side.read_text())["pid"] == proc.pid, timeout=90), (
        proc.stderr.read1().decode() if proc.poll() is not None else "no sidecar"
    )
    return proc, json.loads(side.read_text())


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0


def get(url: str, token: str | None = None, data: bytes | None = None) -> tuple[int, str]:
    headers = {} if token is None else {"Authorization": f"token {token}"}
    req = urllib.request.Request(url, data=data, headers=headers, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=30) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def scrape(address: str) -> dict[str, float]:
    """``/metrics`` read with prometheus_client's own parser, as ``metrics()`` names its series."""
    code, text = get(f"{address}/metrics")
    assert code == 200
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            out[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return out


@pytest.fixture(scope="module")
def reactor_server(tmp_path_factory):
    db = tmp_path_factory.mktemp("observe") / "run.duckdb"
    proc, info = start(db, "--scenario", REALTIME, "--rate", "0", "--window", "1")
    try:
        yield db, f"http://127.0.0.1:{info['port']}", info["token"], proc.pid
    finally:
        stop(proc)


def test_metrics_are_the_values_status_reports_readable_without_the_token(reactor_server):
    db, address, token, _ = reactor_server
    for _ in range(3):
        assert (
            cli(
                "fire", "--db", str(db), "--reactor", "pricing_reactor", "--payload", '{"quote": {"price": 150}}'
            ).returncode
            == 0
        )
    before = scrape(address)  # no Authorization header at all
    status = json.loads(cli("status", "--db", str(db)).stdout)["metrics"]
    after = scrape(address)
    assert set(before) == set(status) == set(after)
    assert status['fanoutsim_reactor_firings_total{graph="pricing_reactor",reactor="pricing_reactor"}'] == 3
    for name, value in status.items():  # counters only grow: status read between the two scrapes
        if "_total" in name or name.split("{")[0].endswith(("_bucket", "_count")):  # gauges move both ways
            assert before[name] <= value <= after[name], name


def test_a_query_string_is_parsed_and_an_unknown_parameter_refused_by_name(reactor_server):
    _, address, token, _ = reactor_server
    code, body = get(f"{address}/fire?x=1", token, data=b'{"reactor": "pricing_reactor"}')
    assert code == 400 and "'x'" in json.loads(body)["error"]
    code, body = get(f"{address}/status?verbose=1&x=2", token)
    assert code == 400 and "'verbose', 'x'" in json.loads(body)["error"]
    code, body = get(f"{address}/status?", token)  # an empty query is no parameter
    assert code == 200 and json.loads(body)["design"] == "reactor"
    code, body = get(f"{address}/nope?x=1", token)
    assert code == 404 and "/nope" in json.loads(body)["error"] and "?" not in json.loads(body)["error"]


def test_the_explain_hint_over_postgres_is_a_pasteable_command_with_no_password(capsys, monkeypatch):
    """A URI with a password: the hint's command names "$URI" (a masked password
    pasted back would be sent as ***), a second line says what to set it to, and
    no secret shows; the shell's expansion of the pasted line is the command
    explain takes. A URI with none is printed as it is."""
    from fanoutsim.cli import _hint_explain, build_parser

    uri = "postgresql://me:s3cret@db.example:5432/runs?sslmode=disable&password=other&options=-csearch_path%3Dx"
    _hint_explain(uri, {"firing": "f-1"})
    said = capsys.readouterr().err
    assert "s3cret" not in said and "other" not in said and "***" not in said
    first, second = said.splitlines()
    pasted = first.split("delivered: ", 1)[1]
    assert shlex.split(pasted) == ["fanoutsim", "explain", "$URI", "f-1"] and "URI set to" in second
    expanded = subprocess.run(
        ["bash", "-c", f"printf '%s\\n' {pasted}"], env={"URI": uri}, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert expanded == ["fanoutsim", "explain", uri, "f-1"]  # what a shell makes of the pasted line, URI set
    args = build_parser().parse_args(expanded[1:])  # the URI, not a key=value DSN explain cannot take
    assert args.db == uri and args.id == "f-1"
    plain = "postgresql://me@db.example:5432/runs?options=-csearch_path%3Dx"
    _hint_explain(plain, {"firing": "f-2"})
    assert shlex.split(capsys.readouterr().err.split("delivered: ", 1)[1]) == ["fanoutsim", "explain", plain, "f-2"]


def test_fire_prints_the_id_and_how_to_explain_it(reactor_server):
    db, _, _, _ = reactor_server
    done = cli("fire", "--db", str(db), "--reactor", "pricing_reactor", "--payload", '{"quote": {"price": 150}}')
    firing = done.stdout.strip()
    assert done.returncode == 0 and len(firing) == 36  # stdout stays the bare id, for scripts
    assert f"fanoutsim explain {db} {firing}" in done.stderr

    def told() -> bool:
        story = cli("explain", str(db), firing)
        return (
            story.returncode == 0
            and "-> incident_response: filter 'payload.quote.price > 100' is true; dispatched 1 time" in story.stdout
        )

    assert wait_for(told, timeout=30)


def test_status_after_a_stop_shows_the_servers_pid_and_when_it_stopped(tmp_path):
    db = tmp_path / "gone.duckdb"
    proc, _ = start(db, "--rate", "0")
    stop(proc)
    done = cli("status", "--db", str(db))
    status = json.loads(done.stdout)
    assert status["pid"] == proc.pid and status["running"] is False and status["db"] == str(db)
    assert status["stopped_at"] and status["servers"][0]["pid"] == proc.pid
    assert f"the last server (pid {proc.pid}) stopped at {status['stopped_at']}" in done.stderr


def test_a_killed_server_is_told_apart_from_a_clean_stop(tmp_path):
    db = tmp_path / "killed.duckdb"
    proc, _ = start(db, "--rate", "0")
    try:
        assert wait_for(lambda: srv.status(str(db))["backlog"]["samples"], timeout=30)  # it has beaten once
    finally:
        proc.send_signal(signal.SIGKILL)  # also when the wait fails: no server outlives the test
        proc.wait(timeout=30)
    done = cli("status", "--db", str(db))
    status = json.loads(done.stdout)
    assert status["pid"] == proc.pid and status["running"] is False and status["stopped_at"] is None
    assert "died without a clean stop" in done.stderr


def test_status_says_when_the_backlog_grows_over_its_window(tmp_path):
    slow = tmp_path / "slow.toml"  # one executor worker, half a second a run, 20 firings a second
    slow.write_text(
        Path(REALTIME)
        .read_text()
        .replace("executor_workers = 4", "executor_workers = 1")
        .replace("duration = 0.005", "duration = 0.5")
    )
    db = tmp_path / "slow.duckdb"
    proc, _ = start(db, "--scenario", str(slow), "--window", "1")
    seen: list[subprocess.CompletedProcess[str]] = []

    def behind() -> bool:
        done = cli("status", "--db", str(db))
        if (json.loads(done.stdout).get("falling_behind") or "").startswith("falling behind: pending +"):
            seen.append(done)
        return bool(seen)

    try:
        assert wait_for(behind, timeout=60)
        # the warning on the call that found it: a later call reads a later window,
        # which a loaded machine may leave without growth
        assert "fanoutsim: warning: falling behind: pending +" in seen[0].stderr
    finally:
        stop(proc)


def test_an_idle_run_is_not_falling_behind(reactor_server):
    db, _, _, _ = reactor_server
    assert wait_for(
        lambda: len(json.loads(cli("status", "--db", str(db)).stdout)["backlog"]["samples"]) >= 5, timeout=30
    )
    assert json.loads(cli("status", "--db", str(db)).stdout)["falling_behind"] is None


@pytest.mark.parametrize(
    "samples, expected",
    [
        ([[0, 21], [5, 75], [10, 133], [15, 160], [20, 190]], "falling behind: pending +169 in 20 s"),
        ([[0, 21], [5, 75], [10, 74], [15, 160], [20, 190]], None),  # one fall: noise, not a trend
        ([[0, 1], [5, 2], [10, 3], [15, 4]], None),  # not a whole window yet
        ([[0, 5], [5, 5], [10, 5], [15, 5], [20, 5]], None),  # flat
    ],
)
def test_falling_behind_needs_a_rise_at_every_sample_of_a_window(samples, expected):
    assert srv.falling_behind(samples, "pending", 20.0) == expected


def test_the_prometheus_text_keeps_names_labels_and_values():
    values = {'fanoutsim_reactor_firings_total{graph="g",reactor="r"}': 3, "fanoutsim_reactor_firings_retained": 2}
    families = {f.name: f for f in text_string_to_metric_families(prometheus_text(values).decode())}
    assert families["fanoutsim_reactor_firings"].type == "counter"
    assert families["fanoutsim_reactor_firings_retained"].type == "gauge"
    [sample] = families["fanoutsim_reactor_firings"].samples
    assert (sample.name, sample.labels, sample.value) == (
        "fanoutsim_reactor_firings_total",
        {"graph": "g", "reactor": "r"},
        3.0,
    )


def test_a_firing_no_subscription_reads_warns_through_the_server(reactor_server):
    """The served scenario subscribes in tenant public only: a firing of tenant
    acme is logged all the same, and both the HTTP answer and fire say so."""
    db, address, token, _ = reactor_server
    body = json.dumps({"reactor": "pricing_reactor", "tenant": "acme"}).encode()
    code, answer = get(f"{address}/write", token, body)
    assert code == 200
    answer = json.loads(answer)
    assert len(answer["firing"]) == 36
    assert answer["warning"].startswith(
        "no subscription of reactor 'pricing_reactor' in tenant 'acme'; subscriptions exist in tenant(s): public"
    )
    done = cli("fire", "--db", str(db), "--reactor", "pricing_reactor", "--tenant", "acme")
    assert done.returncode == 0 and len(done.stdout.strip()) == 36
    assert "fanoutsim: warning: no subscription of reactor 'pricing_reactor' in tenant 'acme'" in done.stderr


def test_a_backlog_sample_shows_only_once_its_heartbeat_is_written():
    """``status`` (another thread) may read the samples at any moment: the first
    shows only after the presence row due with it is written, so whoever sees
    a sample may count on the row (a server killed then is told apart)."""
    seen_during_writes: list[int] = []

    class Con:
        def execute(self, sql, params):
            seen_during_writes.append(len(watch.status()["backlog"]["samples"]))

    class Design:
        backlog_name = "backlog"

        @staticmethod
        def backlog(rt):
            return 7

    watch = srv._Watch.__new__(srv._Watch)  # its parts by hand: no store, no file
    watch.rt, watch.design, watch.window, watch.samples = None, Design, 60.0, []
    watch.t0, watch.next_sample, watch.next_beat = 0.0, 0.0, 0.0
    watch.record, watch.key, watch.con, watch.upsert = {"stopped_at": None}, "server:h:1", Con(), "UPSERT"
    watch.tick()
    assert seen_during_writes == [0]  # the row was written before the sample showed
    assert [s[1] for s in watch.status()["backlog"]["samples"]] == [7]
    assert watch.record["backlog"][0][1] == 7  # the row written carries it
