"""Counters: one series per name and label set, however they are bumped."""

from __future__ import annotations

import threading

from fanoutsim.kernel.metrics import LockedMetrics, Metrics


def test_labels_in_any_order_are_one_series():
    m = Metrics()
    m.inc("x_total", a="1", b="2")
    m.inc("x_total", 2, b="2", a="1")
    assert m.get("x_total", a="1", b="2") == 3
    assert m.as_dict() == {'x_total{a="1",b="2"}': 3}


def test_a_bound_counter_bumps_the_same_series_as_inc():
    m = Metrics()
    c = m.counter("handled_total", consumer="indexer")
    c()
    c(4)
    m.inc("handled_total", consumer="indexer")
    m.counter("handled_total", consumer="mailer")()
    assert m.get("handled_total", consumer="indexer") == 6
    assert m.as_dict() == {'handled_total{consumer="indexer"}': 6, 'handled_total{consumer="mailer"}': 1}


def test_a_locked_counter_waits_for_the_registry_lock():
    # under the GIL a lost update is too rare to catch by racing threads, so this
    # shows the mechanism instead: a bump cannot happen while another holds the lock
    m = LockedMetrics()
    c = m.counter("n_total", who="all")
    done = threading.Event()
    with m._lock:
        t = threading.Thread(target=lambda: (c(), done.set()))
        t.start()
        assert not done.wait(0.2)  # blocked behind the lock
        assert m._values == {}
    assert done.wait(5)
    t.join()
    assert m.get("n_total", who="all") == 1
