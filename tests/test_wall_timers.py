"""The wall clock's timer thread: a callback that fails is told the way a
thread's uncaught error is (``threading.excepthook``), and the others still run."""

from __future__ import annotations

import threading

from fanoutsim.kernel.runtime.wallclock import _Timers


def test_a_failed_timer_callback_goes_to_the_thread_excepthook_and_the_timer_goes_on(monkeypatch):
    seen: list[tuple[type[BaseException], str]] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append((args.exc_type, args.thread.name)))
    ran = threading.Event()
    timers = _Timers("fanoutsim-test-timers")
    try:
        timers.add(0.0, lambda: 1 / 0)
        timers.add(0.01, ran.set)
        assert ran.wait(10)  # the callback after the failed one ran
    finally:
        timers.close()
    assert seen == [(ZeroDivisionError, "fanoutsim-test-timers")]
