"""`make bench`'s cost arithmetic (tests/bench/cost_model.py): counts x list prices = dollars,
worked by hand here; and docs/cost.md's tables, whose dollars are recomputed from its counts
and its prices compared with tests/bench/prices.py, so neither can drift from the code."""

from __future__ import annotations

import re
from datetime import date

import pytest

from tests.bench import cost_model, prices
from tests.bench.cost_model import Usage
from tests.conftest import ROOT

PAGE = ROOT / "docs" / "cost.md"

# A background task's shape: 1 read, 2 writes, 2 deletes, one enqueue (2 operations), a2a and
# worker, 10 ms of a busy instance's time or 200 ms alone, at 1 vCPU and 512 MiB.
EXAMPLE = Usage(
    reads=1,
    writes=2,
    deletes=2,
    tasks_operations=2,
    invocations=2,
    busy_seconds=0.01,
    alone_seconds=0.2,
    vcpu=1,
    memory_gib=0.5,
)


def test_counts_times_prices_are_the_dollars() -> None:
    dollars = cost_model.per_million(EXAMPLE)
    # Per million: 10 x 100,000 reads at $0.03, 20 x writes at $0.09, 20 x deletes at $0.01.
    assert dollars.database == pytest.approx(10 * 0.03 + 20 * 0.09 + 20 * 0.01)  # $2.30
    assert dollars.cloud_tasks == pytest.approx(2 * 0.40)
    assert dollars.requests == pytest.approx(2 * 0.40)
    # One second of the instance: 1 vCPU x $0.000024 + 0.5 GiB x $0.0000025 = $0.00002525.
    assert dollars.compute_busy == pytest.approx(1_000_000 * 0.01 * 0.00002525)  # $0.2525
    assert dollars.compute_alone == pytest.approx(1_000_000 * 0.2 * 0.00002525)  # $5.05
    assert dollars.low == pytest.approx(2.30 + 0.80 + 0.80 + 0.2525)
    assert dollars.high == pytest.approx(2.30 + 0.80 + 0.80 + 5.05)
    # To the cent, each figure rounded on its own (2.30 + 0.80 + 0.80 + 0.25 is 4.15 too).
    assert cost_model.row("x", dollars) == (
        "| x | $2.30 | $0.80 | $0.80 | $0.25-5.05 | **$4.15-8.95** |"
    )


@pytest.mark.parametrize(
    ("wall", "billed"),
    [(0.0001, 0.1), (0.019, 0.1), (0.1, 0.1), (0.1000000000001, 0.1), (0.15, 0.2), (1.2, 1.2)],
)
def test_alone_a_request_is_billed_in_steps_of_100_ms(wall: float, billed: float) -> None:
    assert cost_model.billed_alone(wall) == pytest.approx(billed)


def test_busy_a_request_is_billed_its_cpu_or_its_share_of_the_open_time() -> None:
    assert cost_model.billed_busy(0.004, 0.02, vcpu=1, concurrency=80) == 0.004
    # A stream held open 1.2 s among 80 on an instance: 15 ms of its time, more than its CPU.
    assert cost_model.billed_busy(0.004, 1.2, vcpu=1, concurrency=80) == pytest.approx(0.015)
    assert cost_model.billed_busy(0.004, 0.0, vcpu=2, concurrency=80) == 0.002


def test_turns_that_wait_share_the_instance_they_keep_billed() -> None:
    # 400 turns of 2 s: all at once, answered after 2.5 s, ~320 awaited at once, each billed
    # 6.25 ms of the instance; 80 at a time (five waves), after 10 s: 80 at once, 25 ms each.
    assert cost_model.concurrency_reached(400, 2.0, 2.5) == pytest.approx(320)
    assert cost_model.shared_instance_seconds(400, 2.5) == pytest.approx(0.00625)
    assert cost_model.concurrency_reached(400, 2.0, 10.0) == pytest.approx(80)
    assert cost_model.shared_instance_seconds(400, 10.0) == pytest.approx(0.025)


def test_a_sql_instance_bills_its_month_shared_by_its_tasks() -> None:
    # 730 hours x (1 vCPU x $0.0413 + 3.75 GB x $0.007) + 10 GB x $0.17.
    month = 730 * (0.0413 + 3.75 * 0.007) + 10 * 0.17
    assert cost_model.SQL_SMALLEST.monthly() == pytest.approx(month)  # $51.01
    dollars = cost_model.per_million(EXAMPLE)
    assert cost_model.on_sql(dollars, cost_model.SQL_SMALLEST, 10_000_000).database == (
        pytest.approx(month / 10)
    )
    named = cost_model.per_million_of(
        "a2a-sdk on Cloud SQL, short task, 10M tasks a month", EXAMPLE
    )
    assert named.database == pytest.approx(month / 10)
    assert cost_model.per_million_of("short task", EXAMPLE) == dollars


def test_the_prices_are_dated_and_sourced() -> None:
    assert date.fromisoformat(prices.PRICES_AS_OF) <= date.today()
    for price in prices.ALL:
        assert price.usd > 0 and price.per > 0, price
        assert price.source.startswith("https://cloud.google.com/"), price


def test_a_usage_row_reads_back_as_shown() -> None:
    line = cost_model.usage_row("short task", EXAMPLE)
    assert line == "| short task | 1.0 | 2.0 | 2.0 | 2.0 | 2.0 | 10.0-200.0 | 1, 0.5 |"
    assert cost_model.parse_usage_row(line) == ("short task", cost_model.shown(EXAMPLE))


def test_the_docs_tables_are_the_code_s() -> None:
    text = PAGE.read_text()
    assert prices.table() in text, "docs/cost.md's price table is not tests/bench/prices.py's"
    assert prices.PRICES_AS_OF in text
    rows = [
        line
        for line in text.splitlines()
        if re.match(r"^\| [^|]+ \| \d+\.\d \| ", line)  # a counts table's row
    ]
    assert len(rows) >= 5, "docs/cost.md has no counts table as the bench prints it"
    for line in rows:
        name, usage = cost_model.parse_usage_row(line)
        expected = cost_model.row(name, cost_model.per_million_of(name, usage))
        assert expected in text, f"docs/cost.md's dollars of {name!r} are not {expected}"
