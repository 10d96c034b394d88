# %% [markdown]
# # fanoutsim · Notebooks
#
# Each notebook asks one question about durable event fan-out, answers it with seeded
# simulations (or, in notebook 7, a real run) and ends with **What to take away**: the
# conclusions, with the numbers it computed. They open with their outputs saved — you
# can read any of them without running a cell — and run top to bottom with
# **Run › Run All Cells** (or Kernel › Restart Kernel and Run All Cells). The time is
# for Run All on a two-core machine; long cells show a progress bar.
#
# | notebook | the question it answers | Run All |
# |---|---|---|
# | [00_tour](00_tour.ipynb) | What happens between a reactor firing and a workflow running: the three tables, a CEL filter, a watermark moving one poll at a time, the metrics. | a few seconds |
# | [01_latency_budget](01_latency_budget.ipynb) | How long does a firing take to become a running workflow, and where does the time go? The poll wait is uniform on [0, P); seed 000's ~500 ms budget, stacked. Sliders for P and the batch limit. | ~15 s |
# | [02_duplicate_deliveries](02_duplicate_deliveries.ipynb) | When the runner crashes, how many firings does a subscriber get twice, and how does a workflow make that harmless? | ~10 s |
# | [03_prune_and_ttl](03_prune_and_ttl.ipynb) | How big does the firings table get, and what does keeping it small cost a subscriber that stops reading? A control to explore retention. | ~5 s |
# | [04_cel_filters](04_cel_filters.ipynb) | What does a CEL filter save, what does it not, and what happens when the filter is wrong? | ~15 s |
# | [05_watermark_holes](05_watermark_holes.ipynb) | Which firings can a timestamp watermark skip for good, and what does closing each hole cost? | ~10 s |
# | [06_poll_interval_sweep](06_poll_interval_sweep.ipynb) | What should the poll interval and the batch limit be? A sweep of 78 runs: latency, database load, the backlog's knee, a recommendation; 12 of them again on a Dask LocalCluster. | ~1 min |
# | [07_real_time_vs_virtual](07_real_time_vs_virtual.ipynb) | Does the virtual clock tell the truth? The same scenario on the wall clock (20 real seconds), and a live view of a running engine. | ~30 s |
# | [08_outbox](08_outbox.ipynb) | Seed 002's transactional outbox: what does a lost notification cost, and do the per-consumer guardrails keep one bad consumer or row from wedging the feed? | ~15 s |
# | [09_leases](09_leases.ipynb) | Seed 003's leased consumers: what do lease length, in-flight limits and dead letters cost in duplicates and latency; what do retire and restore do? Sliders to explore. | ~15 s |
# | [10_postgres](10_postgres.ipynb) | Does the model tell the truth on the database the seeds were written for? The same scenario on a real PostgreSQL, a real listener killed, late commits observed, several pollers as processes. | ~40 s |
#
# The notebooks are built from the scripts in `notebooks/src/` by `notebooks/build.py`,
# which executes them; `make test` runs every one again and compares its outputs. The
# library they call is documented in the repository's `README.md`.
