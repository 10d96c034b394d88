"""The leased-consumer design behind ``fanoutsim serve``, ``fanoutsim write``
and ``fanoutsim status`` (what its :class:`~fanoutsim.kernel.design.Design`
record gives the design-free serving process): :func:`open_realtime`,
:func:`write` (a publish) and :func:`status_of`."""

from __future__ import annotations

from typing import Any

from fanoutsim.kernel.designkit import check_write, join_each, populated, status_record, text_field, wall_workloads

from .roles import RECOVERY, ROLES

WRITE_FIELDS = {
    "partition": "the partition the event goes to (required)",
    "kind": 'its kind (default "event")',
    "payload": "its payload, any JSON value (default: none)",
}


def open_realtime(scenario, db: str, *, rate: float | None = None, role: str = "all"):
    """A LeaseRealtime over ``db`` (not started) with the scenario's consumers
    (later joins and retirements, and the ``[[actions]]``, that many seconds
    after the start) and workloads; ``rate``: the workloads scaled to that many
    events a second (0: none; with no scenario, one workload). ``role``: the
    part of the node it runs (:mod:`.roles`): every role registers the
    consumers; the workloads run in ``publishers``, the retirements and
    actions where ``recovery`` runs."""
    from .realtime import LeaseRealtime

    checked = ROLES.check(role)
    part, writes = checked.groups, checked.writes
    if scenario is None:
        rt = LeaseRealtime(store=db, role=role)
        if rate and writes:
            rt.add_workload(rate)
        return rt
    rt = LeaseRealtime(scenario.config, store=db, faults=scenario.faults, seed=scenario.seed, role=role)

    def populate() -> None:
        join_each(rt, scenario.consumers, lambda c: rt.register_consumer(c.name, **c.arguments()))
        if RECOVERY in part:
            _schedule_recovery(rt, scenario)
        workloads = wall_workloads(scenario, rate, rt.add_workload if writes else None)
        for w in workloads if writes else ():
            w.add_to(rt)

    return populated(rt, populate)


def _schedule_recovery(rt, scenario) -> None:
    """The scenario's retirements and ``[[actions]]`` (a restore, a seek), each
    that many seconds after the start."""
    from fanoutsim.kernel.runtime.control import later

    for c in scenario.consumers:
        if c.retire_at is not None:
            later(rt, c.retire_at, lambda name=c.name: rt.retire(name), name=f"fanoutsim-retire-{c.name}")
    for a in scenario.actions:
        step = rt.restore if a.kind == "restore" else (lambda a=a: rt.seek(a.consumer, a.position))
        later(rt, a.at, step, name=f"fanoutsim-{a.kind}")


def write(rt, req: dict) -> dict:
    """A publish: ``{"partition": ..., "kind": ..., "payload": ...}`` -> ``{"event": id}``,
    with ``"warning"`` when no durable consumer is there to lease it."""
    check_write(req, WRITE_FIELDS, "a publish")
    partition = text_field(req, "partition", "a publish")
    kind = text_field(req, "kind", default="event")
    answer: dict[str, Any] = {"event": rt.publish(partition, kind, req.get("payload"))}
    if not rt.table_rows("lease_consumers"):  # a durable consumer reads every partition: none reads this one
        answer["warning"] = (
            f"no durable consumer of this log: nothing leases event {answer['event']} (a consumer registered "
            f"later reads it only if it starts at or before it)"
        )
    return answer


def status_of(rt) -> dict[str, Any]:
    """The leases in a file: events retained, dead letters, each consumer's
    status (as ``riffdb event status`` tells it), the metrics."""
    from fanoutsim.kernel.frames import json_ready  # pandas: only when asked

    rows = rt.table_rows  # of the runtime's named database
    names = [r["consumer"] for r in rows("lease_consumers")]
    body = {
        "events": len(rows("events")),
        "dead_letters": len(rows("dead_letters")),
        "consumers": {name: rt.status(name) for name in names},
    }
    return json_ready(status_record(rt, body))
