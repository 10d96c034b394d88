"""Generate ``fanoutsim/examples/quotes-day.parquet``: one recorded day of pricing quotes.

Seeded and deterministic: running it again writes the same rows.

    .venv/bin/python data/make_quotes_day.py            # writes the file, prints a summary

The day is UTC; ``t`` is seconds since its midnight. Four regional desks
quote while their markets are open, so the rate follows each region's
business hours: a quiet overnight trickle, a ramp at the open, a U-shaped
session (busiest just after the open and before the close) and a ramp down.
The desks overlap (Asia into Europe, Europe into New York, New York into
California), which makes 15:00-17:00 UTC the busiest two hours of the day.

Each of five symbols follows its own random walk (geometric, per second of
the day) with occasional spikes: a jump of 4-15 % that decays back over about
ten minutes. Every region quotes the same walk plus a small regional basis.
Right after a spike the symbol is briefly halted: a few of its quotes then
carry no price (``price`` is null), as a halted book does.

Columns: ``t`` (float seconds since the day's start, sorted), ``tenant``
(``acme`` or ``globex``, each firm with its own regional mix), ``symbol``,
``region`` and ``price`` (float, 2 decimals, null while halted).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

SEED = 20260105
DAY = 86_400.0
OUT = Path(__file__).resolve().parents[1] / "fanoutsim" / "examples" / "quotes-day.parquet"

# region: (open, close) in UTC hours, peak quotes per second, overnight quotes per second
REGIONS = {
    "ap-south": (3.75, 10.0, 0.45, 0.010),  # 09:15-15:30 IST
    "eu-central": (8.0, 16.5, 0.60, 0.015),  # 09:00-17:30 CET
    "us-east": (14.5, 21.0, 0.80, 0.020),  # 09:30-16:00 EST
    "us-west": (16.0, 24.0, 0.35, 0.010),  # 08:00-16:00 PST
}
# symbol: (opening price, volatility per sqrt(day)); spike rate per day
SYMBOLS = {
    "ACME": (100.0, 0.030),
    "GLOBX": (42.0, 0.045),
    "INITECH": (250.0, 0.025),
    "UMBRL": (78.0, 0.050),
    "HOOLI": (160.0, 0.035),
}
SPIKES_PER_DAY = 4.0
SPIKE_DECAY_S = 600.0
HALT_S = 60.0
HALT_PROBABILITY = 0.4
# which symbols each region quotes most (weights in SYMBOLS order)
SYMBOL_MIX = {
    "ap-south": (1, 3, 1, 2, 1),
    "eu-central": (2, 1, 2, 3, 1),
    "us-east": (3, 1, 2, 1, 3),
    "us-west": (2, 1, 1, 1, 4),
}
# share of each region's quotes that go to tenant acme (the rest: globex)
ACME_SHARE = {"ap-south": 0.3, "eu-central": 0.6, "us-east": 0.8, "us-west": 0.7}
BASIS = {"ap-south": 0.003, "eu-central": -0.001, "us-east": 0.0, "us-west": 0.001}


def session_rate(t: np.ndarray, open_h: float, close_h: float, peak: float, night: float) -> np.ndarray:
    """Quotes per second at ``t``: overnight trickle, smooth open and close, a U-shaped session."""
    o, c = open_h * 3600.0, close_h * 3600.0
    ramp = 900.0  # a quarter of an hour to open and to close
    inside = 1.0 / (1.0 + np.exp(-(t - o) / (ramp / 6))) * 1.0 / (1.0 + np.exp((t - c) / (ramp / 6)))
    u_shape = 0.55 + 0.45 * np.exp(-(t - o).clip(0) / 2700.0) + 0.35 * np.exp(-(c - t).clip(0) / 2700.0)
    return night + peak * inside * u_shape


def arrivals(rng: np.random.Generator, rate_fn, max_rate: float) -> np.ndarray:
    """A non-homogeneous Poisson process on [0, DAY) by thinning."""
    n = rng.poisson(max_rate * DAY)
    t = np.sort(rng.uniform(0.0, DAY, n))
    keep = rng.uniform(0.0, max_rate, n) < rate_fn(t)
    return t[keep]


def symbol_paths(rng: np.random.Generator) -> tuple[dict, dict]:
    """Per symbol: the log-price on a 1 s grid (walk + decaying spikes), and its halt windows."""
    grid = np.arange(0.0, DAY + 1.0, 1.0)
    paths, halts = {}, {}
    for sym, (p0, vol) in SYMBOLS.items():
        steps = rng.normal(0.0, vol / np.sqrt(DAY), grid.size)
        steps[0] = 0.0
        log_p = np.log(p0) + np.cumsum(steps)
        n_spikes = rng.poisson(SPIKES_PER_DAY)
        at = np.sort(rng.uniform(0.0, DAY, n_spikes))
        sizes = rng.uniform(0.04, 0.15, n_spikes) * rng.choice([-1.0, 1.0], n_spikes)
        for s_at, size in zip(at, sizes):
            after = grid >= s_at
            log_p[after] += np.log1p(size) * np.exp(-(grid[after] - s_at) / SPIKE_DECAY_S)
        paths[sym] = log_p
        halts[sym] = [(float(a), float(a) + HALT_S) for a in at]
    return paths, halts


def make_day(seed: int = SEED) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    paths, halts = symbol_paths(rng)
    names = list(SYMBOLS)
    parts = []
    for region, (o, c, peak, night) in REGIONS.items():
        rate = functools.partial(session_rate, open_h=o, close_h=c, peak=peak, night=night)
        t = arrivals(rng, rate, night + peak * 1.9)
        weights = np.asarray(SYMBOL_MIX[region], dtype=float)
        sym = rng.choice(len(names), size=t.size, p=weights / weights.sum())
        tenant = np.where(rng.uniform(size=t.size) < ACME_SHARE[region], "acme", "globex")
        parts.append(pd.DataFrame({"t": t, "tenant": tenant, "symbol": np.asarray(names)[sym], "region": region}))
    day = pd.concat(parts, ignore_index=True).sort_values("t", kind="stable").reset_index(drop=True)
    day["t"] = day["t"].round(6)
    # the price: the symbol's walk at that second, the region's basis, a little quote noise
    price = np.empty(len(day))
    second = np.minimum(day["t"].to_numpy().astype(int), int(DAY))
    for sym in names:
        mask = (day["symbol"] == sym).to_numpy()
        log_p = paths[sym][second[mask]]
        log_p = log_p + day.loc[mask, "region"].map(BASIS).to_numpy() + rng.normal(0, 0.0005, mask.sum())
        price[mask] = np.exp(log_p)
    day["price"] = np.round(price, 2)
    # halted books: some quotes right after a spike carry no price
    for sym, windows in halts.items():
        for lo, hi in windows:
            mask = ((day["symbol"] == sym) & (day["t"] >= lo) & (day["t"] < hi)).to_numpy()
            drop = mask & (rng.uniform(size=len(day)) < HALT_PROBABILITY)
            day.loc[drop, "price"] = np.nan
    return day[["t", "tenant", "symbol", "region", "price"]]


def write(day: pd.DataFrame, path: Path = OUT) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(day, preserve_index=False)
    table = table.replace_schema_metadata(
        {
            b"fanoutsim.description": b"one UTC day of pricing quotes; t = seconds since midnight",
            b"fanoutsim.generator": f"data/make_quotes_day.py seed={SEED}".encode(),
        }
    )
    pq.write_table(table, path, compression="zstd", use_dictionary=["tenant", "symbol", "region"])
    return path


def main() -> None:
    day = make_day()
    path = write(day)
    hourly = day.groupby((day["t"] // 3600).astype(int)).size()
    print(
        f"wrote {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}: "
        f"{len(day):,} quotes, {path.stat().st_size / 1e6:.2f} MB"
    )
    print(
        f"busiest hour {hourly.idxmax():02d}:00 UTC ({hourly.max():,} quotes), "
        f"quietest {hourly.idxmin():02d}:00 UTC ({hourly.min():,})"
    )
    print(f"halted (no price): {int(day['price'].isna().sum())} quotes")
    print(day.groupby(["region", "tenant"]).size().unstack().to_string())


if __name__ == "__main__":
    main()
