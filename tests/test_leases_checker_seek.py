"""The leases checker names out-of-order leases that a seek or a restore
explains — a seek back over events the consumer never leased, a seek forward
undone by a restore from an earlier backup — and still calls ``unknown`` the
disorder nothing explains."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from fanoutsim.designs.leases.checker import check_leases
from fanoutsim.scenario import load_scenario

SEEK_BACK = """
design = "leases"
[run]
until = 300.0
[[consumers]]
name = "c0"
join_at = 195.0
start = "end"
[[workload]]
rate = 10.0
[[actions]]
kind = "seek"            # position defaults to "beginning"
at = 217.0
consumer = "c0"
"""

SEEK_FORWARD_THEN_RESTORE = """
design = "leases"
[run]
until = 300.0
[[consumers]]
name = "c1"
poll_interval = 2.0
[[workload]]
rate = 4.0
[[faults]]
kind = "restore_backup"
backup_at = 91.0
at = 233.0
[[actions]]
kind = "seek"
at = 107.0
consumer = "c1"
position = "end"
"""


def run(tmp_path, text, order=None):
    if order is not None:
        text += f'\n[leases]\npartition_order = "{order}"\n'
    path = tmp_path / "scn.toml"
    path.write_text(textwrap.dedent(text))
    return load_scenario(path).run()


class Doctored:
    """A run whose trace() is a doctored copy; everything else is the run's."""

    def __init__(self, sim, trace):
        self._sim, self._trace = sim, trace

    def trace(self):
        return self._trace.copy()

    def __getattr__(self, name):
        return getattr(self._sim, name)


@pytest.fixture(scope="module")
def seek_back(tmp_path_factory):
    return run(tmp_path_factory.mktemp("seek"), SEEK_BACK)


def test_first_leases_after_a_seek_back_over_unleased_events_are_out_of_order_by_seek(seek_back):
    r = check_leases(seek_back)
    assert r.total["out_of_order"] > 100 and r.total["lost"] == 0 and r.total["duplicates"] == 0
    assert set(r.out_of_order["cause"]) == {"seek"}
    assert r.valid, r


@pytest.mark.parametrize("order", ["head_of_line"])
def test_first_deliveries_after_a_seek_back_are_out_of_order_by_seek_under_head_of_line(tmp_path, order):
    r = check_leases(run(tmp_path, SEEK_BACK, order))
    assert r.total["out_of_order"] > 100
    assert set(r.out_of_order["cause"]) <= {"seek", "stale_lease"} and "seek" in set(r.out_of_order["cause"])
    assert r.valid, r


@pytest.mark.parametrize("order", ["riffdb", "head_of_line"])
def test_a_restore_from_before_a_seek_forward_explains_the_disorder_it_brings(tmp_path, order):
    r = check_leases(run(tmp_path, SEEK_FORWARD_THEN_RESTORE, order))
    assert r.total["out_of_order"] > 0
    # only the restore lies between the leases past the seek and the skipped events it brings back
    assert set(r.out_of_order["cause"]) <= {"restore", "stale_lease"} and "restore" in set(r.out_of_order["cause"])
    assert set(r.duplicates["cause"]) <= {"seek", "restore"}
    assert r.valid, r


def test_without_the_seek_in_the_trace_the_same_disorder_is_unknown(seek_back):
    t = seek_back.trace()
    r = check_leases(Doctored(seek_back, t[t["kind"] != "seek"].reset_index(drop=True)))
    assert r.total["out_of_order"] > 100 and set(r.out_of_order["cause"]) == {"unknown"} and not r.valid


def test_disorder_among_the_leases_after_a_seek_is_still_unknown(seek_back):
    # swap two first leases of one partition after the seek: the lower seq now comes after the higher
    t = seek_back.trace()
    seek_at = int(np.flatnonzero(t["kind"].to_numpy() == "seek")[0])
    leased = t[(t["kind"] == "leased") & (t.index > seek_at)]
    part = leased["partition"].iloc[0]
    i, j = leased.index[leased["partition"] == part][:2]
    a, b = t.at[i, "event_id"], t.at[j, "event_id"]
    t.loc[[i, j], "event_id"] = [b, a]
    r = check_leases(Doctored(seek_back, t))
    ooo = r.out_of_order.set_index("event_id")["cause"]
    assert ooo[a] == "unknown" and not r.valid
    assert (ooo.drop(a) == "seek").all()
