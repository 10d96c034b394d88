"""Two ways a sweep spends less time on what is not the run: the collector
paused while a finished run is read (checker, sweep row), and worker
processes forked from a server that has fanoutsim imported."""

from __future__ import annotations

import gc
import multiprocessing
import sys

import pytest

import fanoutsim as fs
from fanoutsim.designs.reactor.checker import check as check_reactor
from fanoutsim.kernel.gcpause import gc_paused


def test_gc_paused_restores_what_it_found():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block leaves the outer one's pause
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with gc_paused():
            raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # off before: still off
    finally:
        gc.enable()


@pytest.mark.parametrize("design", ["reactor", "outbox", "leases"])
def test_a_checker_reads_the_run_with_the_collector_paused(design, monkeypatch):
    scenario = {
        "reactor": "fanoutsim/examples/sweep.toml",
        "outbox": "fanoutsim/examples/outbox.toml",
        "leases": "fanoutsim/examples/leases.toml",
    }[design]
    sim = fs.load_scenario(scenario).build(seed=0)
    sim.run(60.0)
    enabled_while_read = []
    reader = "trace_columns" if design == "reactor" else "trace"  # what each checker reads the trace with
    trace = getattr(sim, reader)

    def watched_trace():
        enabled_while_read.append(gc.isenabled())
        return trace()

    monkeypatch.setattr(sim, reader, watched_trace)
    check = {"reactor": check_reactor, "outbox": fs.check_outbox, "leases": fs.check_leases}[design]
    paused = check(sim)
    assert enabled_while_read and not any(enabled_while_read)
    assert gc.isenabled()  # and on again after it
    monkeypatch.undo()
    assert check(sim).total == paused.total  # the same report either way
    assert gc.isenabled()


@pytest.mark.skipif("forkserver" not in multiprocessing.get_all_start_methods(), reason="no fork server here")
def test_sweep_workers_start_with_fanoutsim_imported_and_frozen():
    from fanoutsim.sweep import _pool

    with _pool(2) as pool:
        started = list(pool.map(_what_a_worker_has, range(2)))
    for preloaded, frozen in started:
        assert preloaded
        assert frozen > 0


def _what_a_worker_has(_):
    return "fanoutsim.sweep_worker" in sys.modules, gc.get_freeze_count()
