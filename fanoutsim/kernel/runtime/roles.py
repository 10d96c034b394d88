"""Roles: one part of a design's process per OS process, several sharing one store.

A design's runtime starts its loops in *groups* (the reactor's ``poll``,
``executor`` and ``prune``; the leases' ``clients``, ``recovery``, ...) and
asks, for each group, whether this process runs it (``self._runs(group)``,
:class:`~.driver.Driver`). A design declares its :class:`Roles`: ``all``,
which runs every group (the default, and the only role on the virtual clock
and over a DuckDB file, which one process holds), and each part a process may
run alone. A process may also run several parts at once: ``"recovery,retention"``.

The group named :data:`WORKLOADS` is the runtime's writers (the scenario's
workloads: firings, commits, publishes): a role without it runs none, and
:meth:`~.driver.Driver._refuse_unless` says so when one is added.

Nothing here knows a design: the design names its groups and roles, and
``fanoutsim serve --role`` (:mod:`fanoutsim.serve`) reads them through
:attr:`~fanoutsim.kernel.design.Design.roles`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

ALL = "all"
WORKLOADS = "workloads"  # the group of the runtime's writers


@dataclass(frozen=True)
class Role:
    """A part of the process: its ``name``, the loop ``groups`` it runs and
    what it is, in one line (``help``, for ``serve --help`` and errors)."""

    name: str
    groups: frozenset[str]
    help: str

    @property
    def writes(self) -> bool:
        """Whether a process of this role runs the scenario's workloads (the :data:`WORKLOADS` group)."""
        return WORKLOADS in self.groups


class Roles(Mapping[str, Role]):
    """A design's roles, by name, ``all`` first. ``parts`` maps each role a
    process may run alone to ``(groups, help)``; ``all`` runs them all and
    the workloads."""

    def __init__(self, design: str, all_help: str, **parts: tuple[tuple[str, ...], str]) -> None:
        self.design = design
        groups = frozenset(g for gs, _ in parts.values() for g in gs) | {WORKLOADS}
        self._roles = {ALL: Role(ALL, groups, all_help)}
        for name, (gs, text) in parts.items():
            self._roles[name] = Role(name, frozenset(gs), text)

    def __getitem__(self, name: str) -> Role:
        return self._roles[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._roles)

    def __len__(self) -> int:
        return len(self._roles)

    @property
    def help(self) -> dict[str, str]:
        """Role -> what it runs: the design's ``Design.roles``."""
        return {name: role.help for name, role in self._roles.items()}

    def check(self, role: str) -> Role:
        """The role ``role`` names — one role, or several joined by commas
        (``"recovery,retention"``: the union of their groups) — or a
        ValueError naming the design's roles."""
        names = check_role(self.help, self.design, role).split(",")
        if len(names) == 1:
            return self._roles[names[0]]
        return Role(
            role,
            frozenset().union(*(self._roles[n].groups for n in names)),
            "; ".join(self._roles[n].help for n in names),
        )


def check_role(roles: Mapping[str, str], design: str, role: str) -> str:
    """``role`` (one, or several joined by commas) checked against ``roles``
    (a design's ``Design.roles``: name -> help); returns it. A ValueError
    names the design's roles."""
    if not isinstance(role, str):
        raise TypeError(f"role must be a string, one of {', '.join(roles)}; got {role!r}")
    names = role.split(",")
    for name in names:
        if name not in roles:
            raise ValueError(f"the {design} design has no role {name!r}; its roles: {', '.join(roles)}")
    if len(names) > 1 and (ALL in names or len(set(names)) != len(names)):
        raise ValueError(f"role {role!r}: name 'all' alone, and each part once")
    return role
