# %% [markdown]
# # 1 · Latency budget
#
# **Question:** how long does a reactor firing take to become a running workflow, and
# where does that time go?
#
# A firing reaches its subscribers by two paths. In-process *computation graphs* are
# called synchronously inside the firing, before its row is written; seed 000 puts
# that at "tens of microseconds (one async call)". *Workflow subscriptions* go through
# the database: the row waits in `reactor_firings` for the next poll, is fetched,
# dispatched as a `workflow_executions` row, claimed by the executor and run. Seed 000's
# budget for that path is "(reactor_poll_interval / 2) average + one
# workflow-execution-insert + one workflow-claim-and-run cycle. Under default
# reactor_poll_interval = 1s, expect ~500ms fire-to-execution-row latency."
#
# This notebook measures both paths in one seeded run, checks the poll wait against its
# theory (uniform on [0, P)), and stacks the DB path's budget next to seed 000's.

# %%
%matplotlib inline
import fanoutsim as fs
from fanoutsim import analysis, plots
from fanoutsim.scenario import load_scenario
from fanoutsim.widgets import latency_explorer

scenario = load_scenario("../fanoutsim/examples/sweep.toml")
sim = scenario.build(seed=0)
sim.runner.register_computation_graph(
    "pricing_reactor", lambda s: "urgent" if s["quote"]["price"] > 100 else "normal", name="router")
sim.run(until=1800)
cfg = sim.config
print(f"{scenario.description}\nP = {cfg.reactor_poll_interval:g} s, batch limit {cfg.reactor_poll_batch_limit}, "
      f"executor tick {cfg.executor_poll_interval:g} s x {cfg.executor_workers} workers; 30 virtual minutes")

# %% [markdown]
# The scenario is `fanoutsim/examples/sweep.toml`: one pricing reactor firing in two
# tenants, two workflows subscribed in each, no filters. On top of it we declare one
# in-process graph, `router`, on the same reactor — so every firing takes both paths.
#
# ## Two paths, one firing

# %%
budget = analysis.latency_budget(sim)
graphs = analysis.graph_latency(sim)
db = analysis.percentiles(budget["fire_to_dispatch"])
print(f"in-process graph calls: {len(graphs):,}, fired -> called: max {graphs['latency_s'].max() * 1e6:.0f} us "
      f"(virtual time)")
print(f"DB path executions:     {len(budget):,}, fired -> dispatched: mean {db['mean'] * 1000:.0f} ms, "
      f"p50 {db['p50'] * 1000:.0f} ms, p99 {db['p99'] * 1000:.0f} ms")

# %% [markdown]
# Every graph call is in the trace at its firing's own timestamp: in virtual time the
# in-process path costs nothing at all (the real cost is the call itself, tens of µs).
# Each firing feeds the two subscriptions of its tenant, so there are two executions
# per firing, each waiting for the poll loop.
#
# ## The poll wait is uniform on [0, P)
#
# The poll loop runs at t = 0, P, 2P, …; a firing at a random instant waits for the next
# one. With nothing queueing (a batch limit of 100 against ~1.5 firings per second in
# the busier tenant), the wait from firing to fetch should be uniform on [0, P): the same
# expected count in every bin (dashed line), mean P/2.

# %%
fig = plots.poll_wait_histogram(budget, cfg.reactor_poll_interval)
fig

# %%
u = analysis.poll_wait_uniformity(budget["poll_wait_s"], cfg.reactor_poll_interval)
print(f"mean poll wait {u['mean_s'] * 1000:.1f} ms (theory P/2 = {u['expected_mean_s'] * 1000:.0f} ms); "
      f"{u['within_p']:.1%} below P")
print(f"Kolmogorov-Smirnov distance to uniform [0, P): {u['ks']:.4f} "
      f"(5% critical value for {u['count']:,} independent samples: {u['ks_critical_5pct']:.4f})")

# %% [markdown]
# The histogram is flat up to P and empty past it, and the KS distance is below its 5%
# critical value: nothing tells the poll wait apart from uniform on [0, P). (The samples
# come in pairs — both subscriptions of a tenant see the same firing and wait the same
# time — so the true critical value is even a little larger.)
#
# ## The stacked budget
#
# `analysis.latency_budget` splits each execution's time from firing to finish at the
# trace's `polled` row of its subscription: **poll wait** (fired → fetched), **insert /
# round trip** (fetched → dispatched: the store round trip, `Simulation.fetch_latency`,
# zero here), **claim wait** (dispatched → claimed by the executor) and **run**
# (claimed → finished). Seed 000's estimate is the first row: P/2, one round trip, half
# an executor tick, the declared mean run time.

# %%
table = analysis.budget_table(sim, budget)
print((table * 1000).round(1).rename(columns=lambda c: c.removesuffix("_s") + " (ms)").to_string())

# %%
fig = plots.budget_bars(table)
fig

# %% [markdown]
# The poll wait is most of the budget: three quarters of the DB path. The claim wait is
# larger than the estimate's half tick, for two reasons. The executor's claim loop runs
# every 0.1 s at a phase drawn once per run, while dispatches happen on the poll loop's
# own beat (t = 0, 1, 2, … s), so the gap from a dispatch to the next claim is the same
# every time, not uniform. And a poll dispatches a whole second's firings at once (four
# executions on average) to an executor that claims at most four (its workers) per
# tick, so some wait a tick more. Which phase a run gets depends on the seed:

# %%
for seed in range(5):
    s = scenario.build(seed=seed)
    s.run(until=300)
    b = analysis.latency_budget(s)
    print(f"seed {seed}: executor phase {s.executor_phase * 1000:5.1f} ms, "
          f"claim wait mean {b['claim_wait_s'].mean() * 1000:5.1f} ms, "
          f"fire -> dispatch mean {b['fire_to_dispatch'].mean() * 1000:5.1f} ms")

# %% [markdown]
# Across seeds the claim wait is the phase plus about 31–37 ms of queueing; only
# averaged over many runs (random phases) would the first part come to the estimate's
# 50 ms. The fire-to-dispatch mean stays near P/2 = 500 ms whatever the seed.
#
# ## Try it: the poll interval and the batch limit
#
# The control re-runs the same seed at the chosen P and batch limit and redraws the
# poll-wait histogram and the budget. Set P to 2 s and the batch limit to 1: the busier
# tenant fires 1.5 times a second, but a subscription now drains at most 1 / 2 s =
# 0.5 firings per second, so the backlog grows and the poll wait leaves [0, P) behind
# (notebook 6 sweeps that knee). Executed headless, the control shows its default
# state, drawn again below.

# %%
# NBVAL_IGNORE_OUTPUT
explorer = latency_explorer(scenario, seed=0, until=600)
explorer

# %%
print(explorer.summary.value)
explorer.figure

# %% [markdown]
# The same comparison, computed rather than clicked: P = 2 s with batch limits 100 and 1.

# %%
for batch in (100, 1):
    w = latency_explorer(scenario, seed=0, until=600, poll_interval=2.0, batch_limit=batch)
    print(w.summary.value)

# %% [markdown]
# ## What to take away
#
# - **In-process vs DB path.** In 30 virtual minutes, 3,569 graph calls happened at
#   their firing's own timestamp (0 µs of virtual time), while 7,138 workflow executions
#   waited a mean of 497 ms from firing to dispatch (p50 495 ms, p99 989 ms). The graph
#   path is immediate and not durable; the DB path pays the poll wait for durability.
# - **The poll wait is uniform on [0, P).** Mean 497.3 ms against P/2 = 500 ms, 100.0%
#   of the waits below P, and a KS distance of 0.0136, below the 5% critical value of
#   0.0161.
# - **Seed 000's "~500 ms" holds** for fire-to-execution-row at P = 1 s: 497 ms
#   measured. Its budget for the whole path (poll wait 500 ms + claim wait 50 ms + run
#   35 ms = 585 ms) undershoots the measured 656.1 ms by the claim wait: 124.5 ms in
#   this run, because the executor's phase is fixed per run (13.8 to 92.1 ms over five
#   seeds, giving claim waits of 44.9 to 123.9 ms) and a poll's burst of dispatches
#   queues for the four workers.
# - **A batch limit that is too small breaks the budget.** At P = 2 s with batch 100 the
#   mean poll wait is 1,000 ms (P/2) and the backlog 14 firings; with batch 1 the
#   backlog reaches 1,160 firings in 10 minutes and the mean poll wait 103,565 ms.
#   Notebook 6 finds where that knee is.
