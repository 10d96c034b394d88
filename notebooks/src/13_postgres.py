# %% [markdown]
# # 10 · The model against a real PostgreSQL
#
# **Question:** the simulator *models* what PostgreSQL does to the designs — a
# notification lost while nobody listens, a sequence value visible only at commit,
# two pollers reading one watermark. Does the model tell the truth when the very same
# engine runs over the database the seed systems were written for?
#
# This notebook starts a throwaway PostgreSQL 16 of its own (the `postgres` extra's
# `pgserver`), runs each question for real on the wall clock, and reads the answer
# with the same checkers the simulations use. The wall-clock numbers change from run
# to run; the verdicts do not.

# %%
%matplotlib inline
import threading, time, warnings
from urllib.parse import quote

import psycopg

import fanoutsim as fs
from fanoutsim.analysis import compare_latency, latency_frame
from fanoutsim.designs.outbox import OutboxConfig
from fanoutsim.designs.outbox.analysis import latency_frame as outbox_latency
from fanoutsim.designs.outbox.checker import check_outbox
from fanoutsim.designs.outbox.realtime import OutboxRealtime
from fanoutsim.designs.reactor.pgreplicas import several_pollers
from fanoutsim.kernel.pg import EmbeddedServer
from fanoutsim.plots import latency_side_by_side

warnings.simplefilter("ignore")
server = EmbeddedServer()  # initdb and start in a temporary folder; server.close() removes it
_schemas = iter(range(1, 100))

def fresh():
    """The DSN of a new, empty schema: each experiment starts from empty tables."""
    name = f"nb10_{next(_schemas)}"
    with psycopg.connect(server.dsn, autocommit=True) as con:
        con.execute(f'CREATE SCHEMA "{name}"')
    return server.dsn + "&options=" + quote(f"-csearch_path={name}")

with psycopg.connect(server.dsn) as con:
    print(con.execute("SELECT split_part(version(), ' ', 2)").fetchone()[0].split(".")[0] == "16"
          and "PostgreSQL 16 is running")

# %% [markdown]
# ## 1 · The same scenario, simulated and on PostgreSQL
#
# The reactor at poll interval P = 0.5 s and 20 firings a second: once under SimPy
# with the memory store, once on the wall clock with every statement going to
# PostgreSQL. Seed 000's budget: the wait for the next poll is uniform on [0, P).

# %%
# NBVAL_IGNORE_OUTPUT
config = fs.SchedulerConfig(reactor_poll_interval=0.5, executor_poll_interval=0.05)
SECONDS = 6.0

def setup(host):
    host.runner.register_workflow("audit", duration=0.005)
    host.runner.subscribe_workflow_to_reactor("pricing_reactor", "audit")
    host.add_workload("pricing_reactor", 20.0)

sim = fs.Simulation(config, seed=0)
setup(sim)
sim.run(until=SECONDS)
virtual = latency_frame(sim)

rt = fs.Realtime(config, store=fresh(), seed=0)
setup(rt)
rt.start()
time.sleep(SECONDS)
rt.stop()
real = latency_frame(rt)
cmp = compare_latency(virtual, real)
print(f"executions   virtual {cmp['n_virtual']:>4}   PostgreSQL {cmp['n_real']:>4}")
print(f"p50 (ms)     virtual {cmp['p50_virtual'] * 1e3:>4.0f}   PostgreSQL {cmp['p50_real'] * 1e3:>4.0f}")
print(f"KS statistic {cmp['ks']:.3f} (the samples differ at 5% above {cmp['ks_critical_5pct']:.3f})")
print(f"statements sent to PostgreSQL: {rt.store.statements}")
rt.close()

# %%
latency_side_by_side(virtual, real, poll_interval=0.5)

# %% [markdown]
# ## 2 · A real listener killed, and the safety poll
#
# The outbox's writer commits its row and `pg_notify(channel, seq)` in one
# transaction; a listener connection of its own wakes the dispatcher. We kill that
# connection's backend with `pg_terminate_backend` and commit while it is gone:
# PostgreSQL does not queue for a listener that is not there, so those hints are lost
# — and the safety poll (every 0.3 s) delivers the rows anyway.

# %%
ob = OutboxRealtime(OutboxConfig(safety_poll_interval=0.3), store=fresh())
ob.register_consumer("indexer", duration=0.001)
ob._pg.reconnect = 1.0  # a slow reconnect: a window with nobody listening
ob.start()
while ob._pg.backend_pid is None:
    time.sleep(0.02)
first = ob.commit("p0", "before")
time.sleep(0.3)
ob.kill_listener()
while ob._pg.lost_connections == 0:
    time.sleep(0.02)
during = [ob.commit(f"p{i}", "while nobody listens") for i in range(1, 6)]
time.sleep(1.5)
last = ob.commit("p9", "after")
time.sleep(0.5)
ob.stop()
hinted = set(outbox_latency(ob).query("hinted")["seq"])
report = check_outbox(ob)
print(f"hinted: before the kill {first in hinted}; during it {sorted(set(during) & hinted)}; after {last in hinted}")
print(f"committed {report.total['committed']}, delivered {report.total['delivered']}, lost {report.total['lost']}")
ob.close()

# %% [markdown]
# ## 3 · Late commits, observed
#
# A writer takes its seq at insert and holds its transaction open for 0.8 s while
# three later writers commit. With `read_mode="all"` the dispatcher reads past the
# gap, and the late row becomes visible under a cursor that has already passed it:
# the checker names it lost, `late_commit`. With `read_mode="gap"` the dispatcher
# waits at the gap, and nothing is lost.

# %%
for mode in ("all", "gap"):
    ob = OutboxRealtime(OutboxConfig(safety_poll_interval=0.1, read_mode=mode, gap_timeout=5.0), store=fresh())
    ob.register_consumer("indexer", duration=0.001)
    ob.start()
    while ob._pg.backend_pid is None:
        time.sleep(0.02)
    ob.commit("p0", "x")
    held = []
    writer = threading.Thread(target=lambda: held.append(ob.hold_commit("slow", "y", hold=0.8)))
    writer.start()
    time.sleep(0.2)
    later = [ob.commit(f"p{i}", "x") for i in range(1, 4)]
    writer.join()
    time.sleep(0.8)
    ob.stop()
    r = check_outbox(ob)
    causes = sorted(set(r.lost["cause"])) if len(r.lost) else []
    print(f"read_mode={mode!r}: seq {held[0]} held open, {later} committed first -> lost {r.total['lost']} {causes}")
    ob.close()

# %% [markdown]
# ## 4 · Several pollers, as separate processes
#
# Three processes poll one subscription: this one (the runner, with the executor)
# and two poll-only replicas. Each reads the watermark, dispatches what is past it,
# then moves it — under READ COMMITTED two of them regularly read the same watermark.
# The reactor's checker reads the merged traces and the database's tables.

# %%
# NBVAL_IGNORE_OUTPUT
out = several_pollers(fresh(), 3, seconds=1.0, rate=40.0)
t = out["report"].total
print(f"pollers {out['pollers']}: {out['firings']} firings, {out['executions']} executions")
print(f"lost {t['lost']}; extra deliveries {t['extra_deliveries']} by cause {t['duplicate_causes']}")

# %%
server.close()

# %% [markdown]
# ## What to take away
#
# - The virtual clock's latency and PostgreSQL's have the same shape: the poll wait,
#   uniform on [0, P). What the database adds is a few milliseconds of statements.
# - A lost notification is real, and costs what the model says: latency up to one
#   safety poll, never a row.
# - The late-commit hole is real: a seq taken at insert and visible at commit is lost
#   under `read_mode="all"` and kept by `"gap"`, and the checker names it the same way
#   it names the simulated one.
# - Several pollers duplicate, from real transactions; the checker attributes the
#   duplicates to them (`several_pollers`). The run-to-run counts vary; the causes do not.
