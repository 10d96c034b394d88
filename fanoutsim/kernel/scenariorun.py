"""What every design's checked scenario holds from its file's header and
``[run]`` table, and how it runs: the design builds its simulation, the
virtual clock runs it to ``until``."""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fanoutsim.kernel.scenario import ScenarioError, check_overrides, refuse_existing_store
from fanoutsim.kernel.store import is_postgres

DOWN_RETRY = 0.1  # virtual seconds between a scheduled step's tries while the node is down


def refuse_held_schema(source: str, store: object) -> None:
    """A scenario starts from empty tables: a ``postgresql://`` URI whose schema
    already holds fanoutsim's tables is refused, untouched (read before the
    store is opened, which would create and migrate tables). Only here: the
    wall-clock processes that share a database open it through their runtime,
    as it is. A throwaway server (``"postgres"``) is always new."""
    if not isinstance(store, str) or store == "postgres" or not is_postgres(store):
        return
    from fanoutsim.kernel.store.postgres import held_run

    problem = held_run(store)
    if problem is not None:
        raise ScenarioError(source, [("run.store", problem)])


@dataclass(frozen=True)
class ScenarioRun:
    """A scenario's name, file and ``[run]`` values; a design's scenario adds
    its own fields (all with defaults) and :meth:`build`."""

    name: str
    source: str
    until: float
    seed: int = 0
    store: str = "memory"
    start: str | datetime | None = None
    description: str = ""
    faults: Any = None  # a FaultPlan, from [[faults]]
    config: Any = None  # the design's config, from its settings table (a design's scenario types it)

    def build(self, seed: int | None = None, store: Any = None, until: float | None = None) -> Any:
        """The design's simulation at virtual time 0, nothing run yet."""
        raise NotImplementedError

    def checked_overrides(self, seed: int | None, store: Any, until: float | None) -> tuple[int, Any]:
        """The ``seed`` and ``store`` a build uses: the overrides checked like the
        file's ``[run]`` values (None: the file's), and an existing .duckdb file
        or a PostgreSQL schema that holds fanoutsim's tables refused, since a
        scenario starts from empty tables."""
        seed, store, _ = check_overrides(self, seed, store, until)
        refuse_existing_store(self.source, store)
        refuse_held_schema(self.source, store)
        return seed, store

    def new_simulation(
        self, simulation: Callable[..., Any], seed: int | None, store: Any, until: float | None
    ) -> tuple[Any, int]:
        """``simulation`` (the design's virtual-clock face) over this scenario's
        config, start and faults, with the overrides checked: what every
        :meth:`build` starts from. Returns ``(sim, seed)``: the seed in force."""
        seed, store = self.checked_overrides(seed, store, until)
        return simulation(self.config, seed=seed, store=store, start=self.start, faults=self.faults), seed

    @staticmethod
    def when_up(
        sim: Any, at: float, step: Callable[..., None], *args: Any, ready: Callable[[Any], bool] | None = None
    ) -> Generator[Any, Any, None]:
        """A SimPy process: run ``step(sim, *args)`` at virtual time ``at``, or
        once the design's node is back up and ``ready(sim)`` holds, if later (a
        crash may have put the node down, or delayed what ``ready`` waits for)."""
        if at > sim.now:
            yield sim.env.timeout(at - sim.now)
        while not sim.up or (ready is not None and not ready(sim)):
            yield sim.env.timeout(DOWN_RETRY)
        step(sim, *args)

    def run(self, seed: int | None = None, until: float | None = None, store: Any = None) -> Any:
        """Build, then run the virtual clock to ``until`` (the file's by default)."""
        _, _, until = check_overrides(self, seed, store, until)
        sim = self.build(seed=seed, store=store, until=until)
        sim.run(until)
        return sim
