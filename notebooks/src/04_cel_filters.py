# %% [markdown]
# # 4 · CEL filters
#
# **What you will learn**
# - what a filter on a subscription saves downstream of the poll, and what it does not;
# - what happens when the filter fails on a firing, under the policies `skip` and `hold`, and
#   what a *dead letter* is;
# - which mistakes are caught when you subscribe, and which only show as a metric.
#
# **What you need first:** [0 · A tour](00_tour.ipynb) (what a filter decides) and
# [1 · Latency budget](01_latency_budget.ipynb) (the batch limit).
#
# **Run All:** about 6 s on two cores.
#
# **The system modelled.** A Cloacina subscription may carry a CEL expression over `payload`,
# `reactor` and `tenant`; the poll loop evaluates it per firing and dispatches only on
# `true`, but advances the watermark either way. Instead of a synthetic feed, this lesson
# replays a recorded day of pricing quotes (`fanoutsim/examples/quotes-day.parquet`): four
# regional desks quoting in their business hours, five symbols with random-walk prices and a
# few spikes, and — right after a spike — a few halted quotes that carry no price.
#
# The experiments are functions in [`experiments/reactor.py`](experiments/reactor.py), beside
# this notebook: read them, copy them, change them.

# %%
%matplotlib inline
import pandas as pd

import fanoutsim as fs
from fanoutsim import analysis, plots
from fanoutsim import examples
from fanoutsim import exercises as ex
from fanoutsim import lesson
from experiments import reactor as rx

day = fs.load_recording(examples.FOLDER / "quotes-day.parquet")  # ships with fanoutsim
hourly = day.groupby(day["t"] // 3600).size()
pd.Series({"quotes": len(day), "busiest hour (UTC)": f"{int(hourly.idxmax()):02d}:00",
           "quotes in it": hourly.max(), "quietest hour (UTC)": f"{int(hourly.idxmin()):02d}:00",
           "halted quotes (no price)": int(day["price"].isna().sum())}, name="the day").to_frame()

# %%
WINDOW = dict(start=15 * 3600.0, stop=16 * 3600.0, speed=10.0)   # 15:00-16:00 UTC, 10x faster
fig = plots.recorded_rate(day, window=(WINDOW["start"], WINDOW["stop"]))
fig

# %% [markdown]
# ## 1. Selectivity against dispatches and lag
#
# We replay 15:00-16:00 UTC, one of the day's busiest hours, ten times faster — six virtual
# minutes — and subscribe one workflow in tenant `acme` with filters from "nothing passes" to
# "everything passes". The workflow runs 0.25 s on 2 executor workers (8 runs/s at most); the
# poll loop reads at most 8 firings per 1 s poll. Each filter is its own seeded run of the
# same replay.
#
# > **Predict.** Going from the filter that passes nothing to the one that passes
# > everything: does the *poll lag* (firing visible → watermark past it) grow, shrink or stay
# > the same? And the *executor lag* (firing → its execution claimed)?

# %%
filters = {
    "nothing": "payload.quote.price > 1000",
    "HOOLI": "payload.quote.symbol == 'HOOLI'",
    "price > 150": "payload.quote.price > 150",
    "us-east": "payload.quote.region == 'us-east'",
    "price > 50": "payload.quote.price > 50",
    "everything": None,
}
sel = rx.selectivity_sweep(day, filters, batch_limit=8, workers=2, duration=0.25, **WINDOW)
sel = sel.set_index("filter")[["firings", "dispatched", "selectivity", "dispatch_per_s",
                               "poll_lag_p95_s", "poll_lag_max_s", "claim_p95_s", "claim_max_s"]]
lesson.table(sel, digits={"selectivity": 1}, percent=["selectivity"],
             highlight=["poll_lag_p95_s", "claim_p95_s"])

# %%
fig = plots.selectivity_lag(sel.reset_index())
fig

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** The poll lag stays the same for every filter: the poll loop reads every firing
# past the watermark, and the batch limit counts firings *read*, not dispatched — in a burst
# the subscription falls behind whatever it keeps. The executor lag is a queue in front of 2
# workers: flat while the filter keeps the load below their capacity, exploding once it does
# not.
#
# </details>
#
# Dispatch volume, meanwhile, is selectivity × the stream's rate:

# %%
fig = plots.selectivity_dispatch(sel.reset_index())
fig

# %% [markdown]
# ## 2. When the filter fails: `skip` and `hold`
#
# The halted quotes carry `"price": null`, and `null > 100` is a CEL evaluation *error*, not
# `false`. A misspelt field (`prcie`) is an error on *every* firing. Under
# `predicate_error_policy = "skip"` an error counts as false and the watermark moves on; under
# `"hold"` the watermark stays on the failing firing and retries it each poll, and the 5th
# consecutive error on the same firing *dead-letters* it (advance past it, mark the
# subscription degraded). Replayed: 18:00-19:00 UTC at ten times speed, batch limit 100.
#
# > **Predict.** With the misspelt filter under `skip`, what does the subscription look like
# > from outside — its lag, its health — and how many firings does it dispatch?

# %%
ERRORS = dict(start=18 * 3600.0, stop=19 * 3600.0, speed=10.0)
errors = rx.error_policy_table(day, {"price > 100": "payload.quote.price > 100",
                                           "misspelt field": "payload.quote.prcie > 100"}, **ERRORS)
lesson.table(errors.drop(columns="last_error"), digits=3)

# %%
lesson.table(pd.Series(list(dict.fromkeys(errors["last_error"])),
                       name="the errors, as reported").to_frame(), index=False)

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** Under `skip` the misspelt filter dispatched nothing while the subscription looked
# healthy: fail-closed means silent. Under `hold` it was loud — errors, dead letters, a
# degraded subscription — and it stalled.
#
# </details>
#
# ## 3. What is caught when you subscribe
#
# The filter is compiled when the subscription is written.
#
# > **Predict.** Which of these are refused at subscribe time, and which are accepted?

# %%
verdicts = analysis.predicate_verdicts([
    "payload.quote.price > 100 && payload.quote.region == 'us-east'",
    "paylod.quote.price > 100",
    "price > 100",
    "payload.quote.price >> 100",
    "payload.quote.region = 'us-east'",
    "payload.quote.prcie > 100",
])
lesson.table(verdicts.assign(message=verdicts["message"].mask(verdicts["accepted"], "accepted")),
             index=False)

# %% [markdown]
# <details><summary>Show the answer</summary>
#
# **Read.** A syntax error or an unknown variable is refused with `InvalidPredicate`, and no
# row is written. A misspelt *field* is not a variable: `payload.quote.prcie` compiles, and
# fails on every firing instead — the case above. Watch
# `fanoutsim_reactor_predicate_errors_total` for the rest.
#
# </details>
#
# ## Exercises
#
# ### Exercise 4.1 — write a filter
#
# Give, as a string, a CEL filter that passes the quotes from region `us-east` priced above
# 100 and nothing else. The checker subscribes with it and fires quotes of its own.

# %%
my_filter = ...  # a string of CEL

ex.check("4.1", my_filter)

# %% solution
from fanoutsim import exercises as ex

my_filter = "payload.quote.region == 'us-east' && payload.quote.price > 100"
ex.check("4.1", my_filter)

# %% [markdown]
# ### Exercise 4.2 — how long `hold` holds
#
# Write `errors_before_dead_letter(limit)`: a `fs.Simulation` with
# `predicate_error_policy="hold"` and `predicate_error_limit=limit`, one subscription with the
# misspelt filter `payload.quote.prcie > 100`, one firing, 20 virtual seconds; return the
# number of predicate errors counted (the metric `fanoutsim_reactor_predicate_errors_total`).

# %%
def errors_before_dead_letter(limit):
    ...  # your code here


ex.check("4.2", errors_before_dead_letter)

# %% solution
import fanoutsim as fs
from fanoutsim import exercises as ex


def errors_before_dead_letter(limit):
    config = fs.SchedulerConfig(predicate_error_policy="hold", predicate_error_limit=limit)
    sim = fs.Simulation(config=config, seed=0)
    sim.runner.subscribe_workflow_to_reactor("r", "w", when="payload.quote.prcie > 100")
    sim.fire("r", {"quote": {"price": 150}})
    sim.run(until=20)
    return sum(v for k, v in sim.metrics().items()
               if k.startswith("fanoutsim_reactor_predicate_errors_total"))


ex.check("4.2", errors_before_dead_letter)

# %% [markdown]
# ## What to take away

# %% hidden
e = errors.set_index(["filter", "policy"])
typo_skip, typo_hold = e.loc[("misspelt field", "skip")], e.loc[("misspelt field", "hold")]
lo, hi = sel["poll_lag_p95_s"].min(), sel["poll_lag_p95_s"].max()
lag_range = f"{lo:.2f} s, the same" if lo == hi else f"{lo:.2f}-{hi:.2f} s"
lesson.takeaway(
    f"A filter cuts dispatch in proportion to what it passes: `HOOLI` dispatched "
    f"{sel.loc['HOOLI', 'dispatched']:,} of {sel.loc['HOOLI', 'firings']:,} quotes "
    f"({sel.loc['HOOLI', 'selectivity']:.0%}).",
    f"It does not cut the poll: p95 poll lag {lag_range} for the six filters; a larger batch limit "
    "or a shorter poll interval helps a subscription that falls behind, a tighter filter does not.",
    f"It cuts the executor's queue until the load passes the workers: fire → claim p95 "
    f"{sel.loc['HOOLI', 'claim_p95_s']:.2f} s with `HOOLI`, "
    f"{sel.loc['everything', 'claim_p95_s']:.1f} s with no filter.",
    f"A misspelt field is the dangerous one: accepted at subscribe time, it dispatched "
    f"{typo_skip['dispatched']} under `skip` while looking healthy, and under `hold` made "
    f"{typo_hold['dead_letters']} dead letters and stalled.",
)
