# %% [markdown]
# # 0 · A tour of fanoutsim
#
# **What you will learn**
# - what happens between a reactor *firing* and a workflow running: the three tables
#   `reactor_firings`, `workflow_subscriptions` and `workflow_executions`;
# - how a subscription's *watermark* moves, one poll at a time, and what a filter decides;
# - where the wait between a firing and its execution comes from.
#
# **What you need first:** Python and a little pandas. Nothing about fanoutsim; the words
# in *italics* are in the [glossary](00_index.ipynb#Glossary).
#
# **Run All:** about 2 s on two cores.
#
# **The system modelled.** Cloacina is a workflow engine. One of its components, a
# *reactor*, publishes firings (say, a new price quote); *workflows* subscribe to a reactor by
# name, optionally with a CEL filter. A firing is one row in `reactor_firings`; a poll loop
# turns the rows past each subscription's watermark into `workflow_executions` rows. This
# lesson builds a tiny run and reads its tables.

# %%
%matplotlib inline
import duckdb
import pandas as pd

import fanoutsim as fs
from fanoutsim import exercises as ex
from fanoutsim import lesson

sim = fs.Simulation(config=fs.SchedulerConfig(reactor_poll_interval=1.0), seed=0)
r = sim.runner
r.register_workflow("audit", duration=0.2)
r.register_workflow("incident_response", duration=0.5)
audit = r.subscribe_workflow_to_reactor("pricing_reactor", "audit", tenant="acme")
incident = r.subscribe_workflow_to_reactor("pricing_reactor", "incident_response", tenant="acme",
                                           when="payload.quote.price > 100")
sim.subscriptions()[["workflow_name", "tenant_id", "predicate", "last_seen_fired_at"]]

# %% [markdown]
# Two subscriptions on the same reactor and tenant; only `incident_response` has a filter.
# Neither has a watermark yet (`NaT`): a subscription that has never been polled reads
# *every* retained firing.
#
# ## 1. Three firings and the executions they make
#
# The poll loop runs every second: at t = 0, 1, 2, … We fire three quotes, at prices 90, 140
# and 210, at t = 0.25, 0.75 and 1.25 s, and stop the clock at t = 1.75 s.
#
# > **Predict.** How many `workflow_executions` rows exist at t = 1.75 s?
# > (a) 6, one per firing and subscription; (b) 4; (c) 3; (d) 2. Decide, then run the next
# > two cells.

# %%
sim.run(until=0.25)
for price in (90, 140, 210):
    sim.fire("pricing_reactor", {"quote": {"price": price, "region": "us-east"}}, tenant="acme")
    sim.run(until=sim.now + 0.5)
firings = sim.firings()
duckdb.sql("""
    select fired_at, octet_length(payload) as payload_bytes from firings order by fired_at
""").df()

# %%
executions = sim.executions()
made = duckdb.sql("""
    select workflow_name, context->>'$.quote.price' as price, status,
           date_diff('millisecond', cast(context->>'$.reactor_fired_at' as timestamptz),
                     dispatched_at) as fire_to_dispatch_ms
    from executions order by dispatched_at, workflow_name
""").df()
made

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** Three executions: (c). Firing is synchronous — each quote's row is in the log the
# moment it is fired (the table above) — but dispatch waits for the poll. The poll at t = 1 s
# dispatched the two quotes fired before it: both to `audit`, and only the quote at 140 to
# `incident_response` (the quote at 90 failed the filter). The quote fired at t = 1.25 s waits
# for the next poll.
#
# </details>
#
# The JSON context of each execution carries the payload plus `reactor_name`,
# `reactor_firing_id` and `reactor_fired_at`; the firing id is the key a workflow uses to
# make a second delivery harmless ([lesson 2](02_duplicate_deliveries.ipynb)).
#
# ## 2. Watching a watermark move
#
# `sim.poll_once()` runs one pass of the poll loop *now*, at t = 1.75 s. We fire a quote at 50
# — below the filter's threshold — and poll by hand. The quote at 210 (t = 1.25 s) has not been
# polled yet either, so this poll reads two firings for each subscription; the watermarks are
# shown in seconds since the run's start.
#
# > **Predict.** The filtered subscription dispatches nothing for the quote at 50. Does its
# > watermark move? (a) no: nothing was dispatched; (b) yes, as far as the unfiltered one's.

# %%
sim.fire("pricing_reactor", {"quote": {"price": 50, "region": "eu-central"}}, tenant="acme")
before = sim.subscriptions().set_index("workflow_name")["last_seen_fired_at"]
runs_before = sim.executions().groupby("workflow_name").size()
sim.poll_once()
after = sim.subscriptions().set_index("workflow_name")["last_seen_fired_at"]
runs_now = sim.executions().groupby("workflow_name").size()
new_runs = runs_now - runs_before.reindex(runs_now.index, fill_value=0)
start = pd.Timestamp(sim.start_us, unit="us", tz="UTC")  # the run's t = 0
moved = pd.DataFrame({"watermark before (s)": (before - start).dt.total_seconds(),
                      "after (s)": (after - start).dt.total_seconds(),
                      "dispatched by this poll": new_runs,
                      "watermark moved by (s)": (after - before).dt.total_seconds()})
moved

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** (b). `audit` dispatched both quotes (210 and 50); `incident_response` only the one
# at 210. Yet both watermarks went from t = 0.75 s to t = 1.75 s, when the quote at 50 was
# fired: had the false filter held the watermark, it would have stopped at 1.25 s, the quote at
# 210.
# **A CEL false still advances the watermark**, so a filtered-out firing is never evaluated
# again. The watermark says "read up to here", not "delivered up to here".
#
# </details>
#
# ## 3. Metrics
#
# The engine counts what it does, in the Prometheus style of a `GET /metrics` page:
# `name{label="value"}` (`sim.metrics()` returns that page as a dict). Ten virtual seconds
# more, then every metric but the histogram's buckets:

# %%
sim.run(until=10)
page = pd.Series(sim.metrics())
metrics = pd.DataFrame({"metric": page.index.str.split("{").str[0],
                        "labels": page.index.str.extract(r"\{(.*)\}", expand=False).fillna(""),
                        "value": [f"{v:g}" for v in page]})
lesson.table(metrics[~metrics["metric"].str.endswith("_bucket")], index=False)

# %% [markdown]
# **Read.** (Each name below drops the prefix `fanoutsim_reactor_`.) `firings_total`: the 4
# quotes, all still retained (`firings_retained`; nothing pruned). `poll_queries_total`: 22 =
# 2 subscriptions × 11 polls (the timed ones at t = 0, 1, …, 9 and the one by hand): the
# reactor queries every subscription at every poll, with or without traffic.
# `fire_to_dispatch_seconds` is a histogram of the waits: `_count` 6 executions, `_sum`
# 2.25 s of waiting (0.75 + 0.25 + 0.25 for the first poll; 0.5 + 0.5 + 0 for the poll by
# hand); its `_bucket` rows, left out above, count the waits under each bound `le`.
# `watermark_lag_seconds` 0: both subscriptions have read every firing. The executions
# themselves:

# %%
counts = sim.executions().groupby("workflow_name").size()
fired = [v for k, v in sim.metrics().items() if k.startswith("fanoutsim_reactor_firings_total")]
n_fired = int(sum(fired))
pd.DataFrame({"firings": [n_fired], "audit runs": [counts["audit"]],
              "incident runs": [counts["incident_response"]]})

# %% [markdown]
# ## Exercises
#
# Each exercise is a function you write against the public API (`import fanoutsim as fs`).
# The last line of its cell asks the checker, which calls your function with inputs of its
# own: it says *right*, what is off and a hint, or — for an answer of another kind than the
# one asked — the shape it expects. A solution is in the collapsed cell below each exercise,
# labelled *Solution (open after trying)*: click it to open it.
#
# ### Exercise 0.1 — what a filter dispatches
#
# Write `dispatched(prices, threshold)`: a fresh `fs.Simulation`, one workflow subscribed to
# `pricing_reactor` with the filter `payload.quote.price > threshold`, one firing per price
# (payload `{"quote": {"price": p}}`), run long enough for the poll to pass them all, and
# return how many executions were made.

# %%
def dispatched(prices, threshold):
    ...  # your code here


ex.check("0.1", dispatched)

# %% solution
import fanoutsim as fs
from fanoutsim import exercises as ex


def dispatched(prices, threshold):
    sim = fs.Simulation(seed=0)
    sim.runner.subscribe_workflow_to_reactor("pricing_reactor", "w",
                                             when=f"payload.quote.price > {threshold}")
    for p in prices:
        sim.fire("pricing_reactor", {"quote": {"price": p}})
    sim.run(until=5)
    return len(sim.executions())


ex.check("0.1", dispatched)

# %% [markdown]
# ### Exercise 0.2 — how long a firing waits
#
# Write `wait(fire_at, poll_interval)`: a fresh simulation with that
# `reactor_poll_interval`, one unfiltered subscription, one firing at virtual time `fire_at`
# (run the clock to it first); return that firing's fire → dispatch time in seconds, read
# from `analysis.latency_frame(sim)` (`from fanoutsim import analysis`; column
# `fire_to_dispatch`).

# %%
def wait(fire_at, poll_interval):
    ...  # your code here


ex.check("0.2", wait)

# %% solution
import fanoutsim as fs
from fanoutsim import analysis
from fanoutsim import exercises as ex


def wait(fire_at, poll_interval):
    sim = fs.Simulation(config=fs.SchedulerConfig(reactor_poll_interval=poll_interval), seed=0)
    sim.runner.subscribe_workflow_to_reactor("r", "w")
    sim.run(until=fire_at)
    sim.fire("r", {"n": 1})
    sim.run(until=fire_at + 2 * poll_interval)
    return float(analysis.latency_frame(sim)["fire_to_dispatch"].iloc[0])


ex.check("0.2", wait)

# %% [markdown]
# ## What to take away

# %% hidden
audit_runs, incident_runs = int(counts["audit"]), int(counts["incident_response"])
filtered_to = moved.loc["incident_response", "after (s)"]
other_to = moved.loc["audit", "after (s)"]
waits = made["fire_to_dispatch_ms"].tolist()
lesson.takeaway(
    f"Every firing is one durable row; each subscription turns rows past its watermark into "
    f"executions, one poll at a time: {n_fired} firings became {audit_runs} `audit` runs and "
    f"{incident_runs} `incident_response` runs (the quotes above 100).",
    f"A filter decides dispatch, not progress: the filtered watermark moved past the quote at "
    f"50, which it dispatched to nobody, to t = {filtered_to:.2f} s (the other's: "
    f"t = {other_to:.2f} s).",
    f"Fire → dispatch is the wait for the next poll, between 0 and one poll interval: here "
    f"{waits[0]:.0f} ms and {waits[-1]:.0f} ms for quotes fired at t = 0.25 and 0.75 s. "
    "[Lesson 1](01_latency_budget.ipynb) measures that budget properly.",
)
