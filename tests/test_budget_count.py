"""What a budget's counter computes (plan/budget_count.py), on Workloads shaped as Kueue
0.19 serves them: admitted resources x admitted time inside the period, whatever the
counts' timing, and nothing lost when a Workload ends, is evicted or is deleted between
counts (within one counting interval, the documented bound)."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from kns_testing.budgets import T0, workload
from plan.budget_count import Ledger, count, quantity, spent, warnings

PERIOD = T0 - timedelta(days=1)  # the period started a day before


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def test_quantities_as_the_api_serves_them():
    assert [quantity(v) for v in ("8", "500m", "64Gi", 2, "1e3")] == [8, Decimal("0.5"), 64 * 2**30, 2, 1000]


def test_admitted_resources_times_admitted_time_within_the_period():
    running = workload("a", admitted=0)
    done = workload("b", gpus="2", admitted=0, finished=30)
    other = workload("c", queue="bio", admitted=0)
    result = count([running, done, other], ["physics"], PERIOD, at(60), Ledger("p"))
    # 4 GPUs for an hour, 2 GPUs for half an hour; the bio queue's is not this budget's.
    assert result.used == {"nvidia.com/gpu": Decimal(5), "cpu": Decimal("0.75")}
    assert list(result.ledger.closed) == [f"b@{int(at(0).timestamp())}"] and list(result.ledger.open) == [
        f"a@{int(at(0).timestamp())}"]


def test_only_the_part_inside_the_period_counts():
    early = workload("a", admitted=-60)  # admitted an hour before the period started
    result = count([early], ["physics"], at(0), at(30), Ledger("p"))
    assert result.used["nvidia.com/gpu"] == 2


def test_a_late_or_repeated_count_counts_the_same():
    done = workload("b", admitted=0, finished=30)
    once = count([done], ["physics"], PERIOD, at(45), Ledger("p"))
    again = count([done], ["physics"], PERIOD, at(90), once.ledger)
    late = count([done], ["physics"], PERIOD, at(600), Ledger("p"))
    assert once.used == again.used == late.used == {"nvidia.com/gpu": 2, "cpu": Decimal("0.25")}


def test_a_finished_workload_deleted_after_a_count_is_still_counted():
    seen = count([workload("b", admitted=0, finished=30)], ["physics"], PERIOD, at(40), Ledger("p"))
    after = count([], ["physics"], PERIOD, at(100), Ledger.from_json(seen.ledger.to_json(), "p"))
    assert after.used["nvidia.com/gpu"] == 2


def test_an_eviction_between_counts_is_closed_at_the_eviction_and_a_readmission_counts_anew():
    seen = count([workload("a", admitted=0)], ["physics"], PERIOD, at(10), Ledger("p"))
    evicted = count([workload("a", admitted=0, evicted=20)], ["physics"], PERIOD, at(30), seen.ledger)
    assert evicted.used["nvidia.com/gpu"] == Decimal(4) * 20 / 60
    back = count([workload("a", admitted=0, evicted=20, readmitted=40)], ["physics"], PERIOD, at(70), evicted.ledger)
    assert back.used["nvidia.com/gpu"] == Decimal(4) * 20 / 60 + Decimal(4) * 30 / 60


def test_a_running_workload_deleted_between_counts_is_closed_at_the_last_count():
    seen = count([workload("a", admitted=0)], ["physics"], PERIOD, at(30), Ledger("p"))
    gone = count([], ["physics"], PERIOD, at(90), seen.ledger)
    assert gone.used["nvidia.com/gpu"] == 2  # 30 minutes: at most one interval short


def test_a_new_period_starts_an_empty_ledger():
    seen = count([workload("b", admitted=0, finished=30)], ["physics"], PERIOD, at(40), Ledger("p1"))
    assert Ledger.from_json(seen.ledger.to_json(), "p2").closed == {}
    assert Ledger.from_json(seen.ledger.to_json(), "p1").closed == seen.ledger.closed


def test_spent_and_warnings():
    used = {"nvidia.com/gpu": Decimal(96), "cpu": Decimal(10)}
    assert spent(used, {"nvidia.com/gpu": 100, "cpu": 10}) == ["cpu"]
    assert warnings(used, {"nvidia.com/gpu": 100, "cpu": 1000}, [80, 95]) == [("nvidia.com/gpu", 95)]


def test_a_reservations_use_is_charged_to_the_budget_of_the_entries_that_use_it():
    """docs/budgets.md: a window's use by a budget's entry counts against the budget (as Slurm
    charges a reservation's jobs to their account); the holder's and other teams' do not."""
    mine = {**workload("a", queue="kns-res-course", admitted=0, finished=30), "metadata": {"uid": "a",
                                                                                           "namespace": "kns-train"}}
    other = {**workload("b", queue="kns-res-course", admitted=0, finished=30),
             "metadata": {"uid": "b", "namespace": "kns-res-course"}}
    result = count([mine, other], ["physics"], PERIOD, at(60), Ledger("p"), {"kns-res-course": ["kns-train"]})
    assert result.used["nvidia.com/gpu"] == 2
    assert count([mine, other], ["physics"], PERIOD, at(60), Ledger("p")).used == {}


def test_a_closed_admission_whose_workload_is_gone_is_retired_into_its_hour_and_still_counted():
    done = workload("b", gpus="2", admitted=0, finished=30)
    still = workload("c", gpus="1", admitted=0, finished=90)
    first = count([done, still], ["physics"], PERIOD, at(120), Ledger("p"), present={"b", "c"})
    assert set(first.ledger.closed) == {f"b@{int(at(0).timestamp())}", f"c@{int(at(0).timestamp())}"}
    # b's Workload is gone (its TTL): retired, under the hour it ended in; c stays by key.
    second = count([still], ["physics"], PERIOD, at(150), first.ledger, present={"c"})
    assert list(second.ledger.closed) == [f"c@{int(at(0).timestamp())}"]
    assert second.ledger.retired == {at(0).isoformat(): {"nvidia.com/gpu": Decimal(1), "cpu": Decimal("0.25")}}
    assert second.used == first.used == {"nvidia.com/gpu": Decimal("2.5"), "cpu": Decimal("1")}
    # Stored and read back: the same; the chart spreads the retired hour over that hour.
    from plan.budget_count import used_until
    again = Ledger.from_json(second.ledger.to_json(), "p")
    assert count([still], ["physics"], PERIOD, at(160), again, present={"c"}).used == second.used
    assert abs(used_until(again, [], PERIOD, at(30))["nvidia.com/gpu"] - 1) < Decimal("1e-9")  # half of each
