"""A fourth design that lives only in the tests: it proves the seam.

A trivial log and one consumer with a cursor. Its engine steps are functions
of (store, now); it has its own config, scenario schema, checker, report,
tables, figure, sweep columns and a wall-clock runtime, and reaches
``fanoutsim run``, ``fs.sweep``, ``fanoutsim serve / write / status`` only
through :func:`fanoutsim.designs.register` — nothing under ``fanoutsim/``
names it. The store has no tables of its own for it (the store's schema is
fixed), so it keeps its log in the store's ``outbox`` table and its cursor in
``cursors``.
"""
