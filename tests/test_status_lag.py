"""``fanoutsim status`` of a store a virtual-clock run wrote measures its lags
as of that run's end — the figure the run's report and metrics give — not
against today's wall clock (which is months past a virtual 2026-01-01); a
store a wall-clock process carries on is measured against the wall clock."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

import fanoutsim as fs
from fanoutsim import designs
from fanoutsim.cli import main
from fanoutsim.kernel.store.record import END_KEY, recorded_end

EXAMPLES = Path(fs.__file__).parent / "examples"
# (example, until): each run ends with a lag to measure (between two polls)
RUNS = [("crashes", 20.5), ("outbox", 29.5), ("leases", 20.5)]


def virtual_run(example: str, db: Path, until: float = 20.5) -> tuple[dict, dict[str, float], dict[str, float]]:
    """A short virtual run of ``example`` into ``db``: its report, its lag
    metrics at the end (seconds) and the reactor's per-subscription lags."""
    sim = fs.load_scenario(EXAMPLES / f"{example}.toml").run(until=until, store=str(db))
    try:
        design = designs.design_of(sim)
        report = design.report(sim, name=example, checked=design.check(sim))
        lags = {k: v for k, v in sim.metrics().items() if "_lag_seconds" in k}
    finally:
        sim.close()
    subs = {
        f"{s['reactor']}->{s['workflow']}@{s['tenant']}": s["watermark_lag_s"] for s in report.get("subscriptions", [])
    }
    return report, lags, subs


def status(db: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["status", "--store", str(db)]) == 0
    return json.loads(capsys.readouterr().out)


def instant(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


@pytest.mark.parametrize(("example", "until"), RUNS)
def test_status_of_a_virtual_run_gives_the_lag_its_report_gave(example, until, tmp_path, capsys):
    db = tmp_path / f"{example}.duckdb"
    report, lags, subs = virtual_run(example, db, until)
    assert lags and any(v > 0 for v in lags.values())  # something to measure: a lag at the end
    st = status(db, capsys)
    assert st["clock"] == "virtual" and "end of the virtual-clock run" in st["now_is"]
    assert instant(st["now"]) == instant(report["end"])
    shown = {k: v for k, v in st["metrics"].items() if "_lag_seconds" in k}
    assert shown == pytest.approx(lags, abs=1e-6)
    assert max(shown.values()) < until  # seconds of the run, not days
    if subs:  # the reactor's own field, the report's number
        assert st["watermark_lag_s"] == pytest.approx(subs, abs=1e-6)


def test_a_write_carries_the_run_on_the_wall_clock(tmp_path, capsys):
    db = tmp_path / "outbox.duckdb"
    virtual_run("outbox", db)
    assert main(["write", "--store", str(db), "page=p1"]) == 0
    capsys.readouterr()
    st = status(db, capsys)
    assert st["clock"] == "wall" and st["now_is"] == "the wall clock"
    assert abs((instant(st["now"]) - datetime.now(UTC)).total_seconds()) < 300


def test_a_started_wall_clock_runtime_forgets_the_virtual_end(tmp_path):
    db = tmp_path / "leases.duckdb"
    virtual_run("leases", db)
    rt = fs.LeaseRealtime(store=str(db))
    try:
        assert recorded_end(rt.store) is not None
        rt.start()
        assert recorded_end(rt.store) is None
    finally:
        rt.close()


def test_a_store_that_never_ran_virtually_is_read_on_the_wall_clock(tmp_path, capsys):
    db = tmp_path / "wall.duckdb"
    with fs.OutboxRealtime(store=str(db)) as rt:
        rt.commit("p")
    st = status(db, capsys)
    assert st["clock"] == "wall"
    assert abs((instant(st["now"]) - datetime.now(UTC)).total_seconds()) < 300


def test_an_unreadable_recorded_end_falls_back_to_the_wall_clock(tmp_path, capsys):
    db = tmp_path / "reactor.duckdb"
    virtual_run("crashes", db)
    for junk in ("", "soon", "1.5", "-", str(10**20)):
        rt = fs.Realtime(store=str(db))
        try:
            rt.store.set_meta(END_KEY, junk)
            assert recorded_end(rt.store) is None, junk
        finally:
            rt.close()
        assert status(db, capsys)["clock"] == "wall", junk
