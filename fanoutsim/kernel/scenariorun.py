"""What every design's checked scenario holds from its file's header and
``[run]`` table, and how it runs: the design builds its simulation, the
virtual clock runs it to ``until``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fanoutsim.kernel.scenario import check_overrides, refuse_existing_store


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

    def build(self, seed: int | None = None, store: Any = None, until: float | None = None) -> Any:
        """The design's simulation at virtual time 0, nothing run yet."""
        raise NotImplementedError

    def checked_overrides(self, seed: int | None, store: Any, until: float | None) -> tuple[int, Any]:
        """The ``seed`` and ``store`` a build uses: the overrides checked like the
        file's ``[run]`` values (None: the file's), and an existing .duckdb file
        refused, since a scenario starts from empty tables."""
        seed, store, _ = check_overrides(self, seed, store, until)
        refuse_existing_store(self.source, store)
        return seed, store

    def run(self, seed: int | None = None, until: float | None = None, store: Any = None) -> Any:
        """Build, then run the virtual clock to ``until`` (the file's by default)."""
        _, _, until = check_overrides(self, seed, store, until)
        sim = self.build(seed=seed, store=store, until=until)
        sim.run(until)
        return sim
