"""run_frozen: a run leaves what existed before it out of the collector's
passes, collects what it makes as it goes, and gives the rest back after."""

from __future__ import annotations

import gc
import weakref

import pytest

from fanoutsim.kernel.gcpause import gc_paused, run_frozen


class Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


@pytest.fixture(autouse=True)
def _nothing_frozen():
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_what_existed_before_waits_and_what_the_block_makes_is_collected():
    old = Node()
    gone_old = weakref.ref(old)
    with run_frozen():
        assert gc.get_freeze_count() > 0
        new = Node()
        gone_new = weakref.ref(new)
        del old, new
        gc.collect()
        assert gone_new() is None  # made inside: collected as it goes
        assert gone_old() is not None  # frozen: left alone while the run lasts
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert gone_old() is None  # given back: collected after


def test_nested_blocks_unfreeze_once_at_the_outermost():
    with run_frozen():
        with run_frozen():
            pass
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


def test_a_collector_off_or_frozen_elsewhere_is_left_as_it_was():
    with gc_paused():
        with run_frozen():
            assert gc.get_freeze_count() == 0
    gc.freeze()
    frozen = gc.get_freeze_count()
    with run_frozen():
        pass
    assert gc.get_freeze_count() == frozen  # not unfrozen: another's freeze stays


def test_an_error_in_the_block_unfreezes_too():
    with pytest.raises(ValueError):
        with run_frozen():
            raise ValueError("boom")
    assert gc.get_freeze_count() == 0


def test_a_simulation_run_unfreezes_after_it():
    from fanoutsim.designs.outbox.simulation import OutboxSimulation

    seen: list[int] = []
    sim = OutboxSimulation(seed=1)
    sim.register_consumer("c", duration=0.001, fn=lambda row: seen.append(gc.get_freeze_count()))
    sim.add_workload(5.0)
    sim.run(until=10)
    assert seen and all(n > 0 for n in seen)  # frozen while the consumer's code ran
    assert gc.get_freeze_count() == 0
