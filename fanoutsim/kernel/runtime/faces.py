"""The faces: a design's runtime put over one clock's driver, built the same way for every design.

A design writes its loops and API once, in a runtime class (the :mod:`.binding`
hooks); a *face* puts that class over a driver —
``class OutboxSimulation(OutboxRuntime, VirtualFace)``,
``class OutboxRealtime(OutboxRuntime, WallFace)`` — and its constructor is
written here, once: check the config and the seed, take the design's own
keyword arguments, open the driver over the design's store, set the design up
and make incarnation 0. The design names only what differs, as members of its
runtime class or of the face:

``config_class``          its config's class (``config=None``: its defaults)
``_opener(store)``        how it opens a store (every registered design's tables)
``_options(**options)``   its own keyword arguments (``database=...``), taken before
                          the store opens; the face's signature shows them
``_setup()``              its state over the opened store (before incarnation 0)
``_built()``              what follows incarnation 0's engine (a runtime loop, a reader)
``wall_store``            (wall clock) the default store, a DuckDB file
``_before_run()``         (virtual clock) a check before the clock moves
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from datetime import datetime
from typing import Any, ClassVar, TypeVar, cast

from fanoutsim.kernel.runtime.roles import ALL
from fanoutsim.kernel.runtime.virtual import VirtualRuntime, until_ok
from fanoutsim.kernel.runtime.wallclock import SteppedWallRuntime
from fanoutsim.kernel.store import Store, open_store
from fanoutsim.kernel.validate import is_whole

C = TypeVar("C")


def checked_config(config: C | None, seed: object, config_class: type[C]) -> C:
    """A runtime's common arguments: ``config`` (None: ``config_class()``, the
    defaults) must be a ``config_class`` and ``seed`` an int; returns the config."""
    config = config_class() if config is None else config
    if not isinstance(config, config_class):
        name = config_class.__name__
        raise TypeError(f"config must be {'an' if name[0] in 'AEIOU' else 'a'} {name}, not {type(config).__name__}")
    if not is_whole(seed):
        raise TypeError(f"seed must be an int, got {seed!r}")
    return config


class _DesignFile:
    """The default of a wall-clock face's ``store``: the design's ``wall_store``."""

    def __repr__(self) -> str:
        return "<the design's wall_store>"


DESIGN_FILE: Any = _DesignFile()


class Face:
    """The hooks both faces call, with their defaults (see the module's text)."""

    config_class: type[Any]
    _opener: Callable[[Any], Store] = staticmethod(open_store)
    wall_store: str
    __signature__: ClassVar[inspect.Signature]  # the constructor's, as a caller sees it

    def _options(self) -> None:
        """The design's own keyword arguments (none by default)."""

    def _take_options(self, options: dict[str, Any]) -> None:
        for name in options:
            if name not in inspect.signature(type(self)).parameters:  # as a misspelt argument of __init__ would
                raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument {name!r}")
        self._options(**options)

    def _setup(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _setup()")

    def _built(self) -> None:
        """A hook: what follows incarnation 0's engine."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # help() and inspect show the design's keyword arguments and its store's default, not **options
        cls.__signature__ = _face_signature(cls)


def _face_signature(cls: type[Face]) -> inspect.Signature:
    """``cls.__init__``'s signature as a caller sees it: ``**options`` replaced by
    the keyword-only parameters of the design's ``_options``, ``config`` typed
    as the design's, and a wall face's store default by the design's file."""
    init = inspect.signature(cls.__init__)
    own = [p for p in inspect.signature(cls._options).parameters.values() if p.kind is p.KEYWORD_ONLY]
    params = []
    for p in list(init.parameters.values())[1:]:  # self aside
        if p.kind is p.VAR_KEYWORD:
            continue
        if p.name == "config" and hasattr(cls, "config_class"):
            p = p.replace(annotation=f"{cls.config_class.__name__} | None")
        if p.default is DESIGN_FILE:
            p = p.replace(default=getattr(cls, "wall_store", p.default))
        params.append(p)
    return init.replace(parameters=params + own)


class VirtualFace(Face, VirtualRuntime):
    """A design's runtime under SimPy's virtual clock: a seeded, replayable run."""

    def __init__(
        self,
        config: Any = None,
        seed: int = 0,
        store: Any = "memory",
        *,
        start: str | datetime | None = None,
        faults: object = None,
        trace: bool | str | os.PathLike[str] = True,
        **options: Any,
    ) -> None:
        self.config, self.seed = checked_config(config, seed, self.config_class), seed
        self._take_options(options)
        self._open(seed, store, start, faults, trace, opener=self._opener)
        self._setup()
        self.restart()
        self._schedule_crashes()
        self._built()

    def _before_run(self) -> None:
        """A hook: a check before the clock moves (each :meth:`run`)."""

    def run(self, until: float | None = None) -> None:
        """Run the design's loops until virtual time ``until`` and return: seconds
        since the start, absolute (not a duration), at least :attr:`now`
        (``until == now`` does nothing). Call it again to go on. Refuses ``until``
        None (the loops tick forever: a run needs an end), earlier than now, or
        not finite (ValueError), and a non-number (TypeError); after :meth:`close`,
        a RuntimeError."""
        if not until_ok(self.env, until):
            return
        self._before_run()
        self._advance(cast(float, until))


class WallFace(Face, SteppedWallRuntime):
    """A design's runtime for real, on the wall clock (threads, ``time.time()``);
    ``role`` runs one part of its process (:mod:`.roles`)."""

    def __init__(
        self,
        config: Any = None,
        store: Any = DESIGN_FILE,
        faults: object = None,
        *,
        seed: int = 0,
        trace: bool = True,
        stop_timeout: float = 10.0,
        role: str = ALL,
        **options: Any,
    ) -> None:
        self._take_role(role)  # one part of the process (see .roles), refused before the store is opened
        self.config = checked_config(config, seed, self.config_class)
        self._take_options(options)
        self.seed = seed
        store = self.wall_store if store is DESIGN_FILE else store
        self._open(seed, store, faults, trace, stop_timeout, opener=self._opener)
        self._setup()
        self.engine = self._new_engine(0)  # the API works before start()
        self._built()
