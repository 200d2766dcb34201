"""The arithmetic of `make bench`'s cost table: what one unit of work uses (measured counts)
times Google Cloud's list prices (tests/bench/prices.py) = dollars per million of them.

Compute is billed as Cloud Run bills a request-based service: CPU and memory for the time an
instance handles at least one request, rounded up to 100 ms. That time is given two ways,
the bounds of what a unit of work is billed:
- `busy`: instances full of concurrent requests share their billed time, so a request is
  billed the larger of its CPU time (the instance's vCPU is the limit) and the time it is
  open over the instance's concurrency (a stream held open for its events);
- `alone`: one request at a time, each invocation billed its own time rounded up to 100 ms.
The counts are shown to a tenth (a tenth of a millisecond for billed time) and the dollars
are those of the counts as shown (`shown`), kept unrounded and printed to the cent, so a total
may differ by a cent from the sum of its rounded columns. docs/cost.md holds both tables as the
bench prints them, and tests/test_cost_model.py recomputes the one from the other.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from tests.bench import prices

MILLION = 1_000_000
BILLING_STEP = 0.1  # seconds: Cloud Run rounds billed instance time up to 100 ms


@dataclass(frozen=True)
class Usage:
    """What one unit of work uses, from the bench's counts."""

    reads: float  # Firestore documents
    writes: float
    deletes: float  # every document written is deleted by the TTL policy once
    tasks_operations: float  # Cloud Tasks: each enqueue is a create call and a delivery attempt
    invocations: float  # function requests (a2a, worker, deliver)
    busy_seconds: float  # billed instance time, instances full (see the module's docstring)
    alone_seconds: float  # billed instance time, one request at a time
    vcpu: float  # the function's CPU
    memory_gib: float  # the function's memory


@dataclass(frozen=True)
class Dollars:
    """Dollars per million units of work, by what bills them."""

    database: float  # Firestore's operations (or a Cloud SQL instance's share)
    cloud_tasks: float
    requests: float
    compute_busy: float
    compute_alone: float

    @property
    def low(self) -> float:
        return self.database + self.cloud_tasks + self.requests + self.compute_busy

    @property
    def high(self) -> float:
        return self.database + self.cloud_tasks + self.requests + self.compute_alone


def billed_alone(wall_seconds: float) -> float:
    """One request's billed time, alone on its instance: rounded up to 100 ms (a float's
    noise past a step is not a step more)."""
    return math.ceil(round(wall_seconds / BILLING_STEP, 9)) * BILLING_STEP


def billed_busy(cpu_seconds: float, open_seconds: float, vcpu: float, concurrency: int) -> float:
    """A request's share of a full instance's billed time."""
    return max(cpu_seconds / vcpu, open_seconds / concurrency)


def concurrency_reached(turns: int, wait: float, elapsed: float) -> float:
    """How many turns awaited at once on average: `turns` turns of `wait` seconds each, all
    answered within `elapsed` seconds (an instance that ran them all at once reaches
    `turns`; one that ran them 80 at a time, about 80)."""
    return turns * wait / elapsed


def shared_instance_seconds(turns: int, elapsed: float) -> float:
    """A turn's share of an instance's billed time: `turns` requests all answered within
    `elapsed` seconds keep it billed that long (request-based billing: while it holds a
    request), the same whatever each request does meanwhile."""
    return elapsed / turns


def instance_second(vcpu: float, memory_gib: float) -> float:
    """Dollars for one second of a request-based instance of this size."""
    return vcpu * prices.VCPU_SECOND.each + memory_gib * prices.GIB_SECOND.each


def per_million(usage: Usage) -> Dollars:
    second = instance_second(usage.vcpu, usage.memory_gib)
    return Dollars(
        database=MILLION
        * (
            usage.reads * prices.READ.each
            + usage.writes * prices.WRITE.each
            + usage.deletes * prices.DELETE.each
        ),
        cloud_tasks=MILLION * usage.tasks_operations * prices.TASKS_OPERATION.each,
        requests=MILLION * usage.invocations * prices.REQUEST.each,
        compute_busy=MILLION * usage.busy_seconds * second,
        compute_alone=MILLION * usage.alone_seconds * second,
    )


@dataclass(frozen=True)
class SqlInstance:
    """A Cloud SQL for PostgreSQL instance (Enterprise edition): billed every hour it exists,
    called or not."""

    vcpu: float
    memory_gb: float
    storage_gb: float

    def monthly(self, hours: float = 730) -> float:
        compute = self.vcpu * prices.SQL_VCPU_HOUR.each + self.memory_gb * prices.SQL_GB_HOUR.each
        return hours * compute + self.storage_gb * prices.SQL_SSD_GB_MONTH.each


# The smallest dedicated-core instance (db-custom-1-3840) with 10 GB of SSD: what the SDK's
# DatabaseTaskStore would run on beside a Cloud Run service (a shared-core one has no SLA).
SQL_SMALLEST = SqlInstance(vcpu=1, memory_gb=3.75, storage_gb=10)


def on_sql(dollars: Dollars, sql: SqlInstance, per_month: int) -> Dollars:
    """`dollars` with the database a Cloud SQL instance's month shared by `per_month` units
    of work (it bills the same called or not: a million tasks a month share it, ten million
    pay a tenth each)."""
    return replace(dollars, database=sql.monthly() * MILLION / per_month)


def shown(usage: Usage) -> Usage:
    """`usage` as the counts table shows it."""
    return Usage(
        reads=round(usage.reads, 1),
        writes=round(usage.writes, 1),
        deletes=round(usage.deletes, 1),
        tasks_operations=round(usage.tasks_operations, 1),
        invocations=round(usage.invocations, 1),
        busy_seconds=round(usage.busy_seconds, 4),
        alone_seconds=round(usage.alone_seconds, 4),
        vcpu=usage.vcpu,
        memory_gib=usage.memory_gib,
    )


USAGE_HEADER = (
    "| each | reads | writes | deletes | Cloud Tasks operations | invocations | "
    "billed ms (busy-alone) | vCPU, GiB |\n|---|---|---|---|---|---|---|---|"
)


def usage_row(name: str, usage: Usage) -> str:
    u = shown(usage)
    return (
        f"| {name} | {u.reads:.1f} | {u.writes:.1f} | {u.deletes:.1f} | "
        f"{u.tasks_operations:.1f} | {u.invocations:.1f} | "
        f"{u.busy_seconds * 1000:.1f}-{u.alone_seconds * 1000:.1f} | "
        f"{u.vcpu:g}, {u.memory_gib:g} |"
    )


def parse_usage_row(line: str) -> tuple[str, Usage]:
    """A row `usage_row` wrote, back."""
    name, reads, writes, deletes, operations, invocations, billed, size = (
        cell.strip() for cell in line.strip().strip("|").split("|")
    )
    busy, alone = (float(ms) / 1000 for ms in billed.split("-"))
    vcpu, memory = (float(x) for x in size.split(","))
    usage = Usage(
        float(reads),
        float(writes),
        float(deletes),
        float(operations),
        float(invocations),
        busy,
        alone,
        vcpu,
        memory,
    )
    return name, usage


# A row of the SDK's server on Cloud SQL names how many tasks a month share the instance.
_ON_SQL = re.compile(r"Cloud SQL\b.*?(\d+)M tasks a month$")


def per_million_of(name: str, usage: Usage) -> Dollars:
    """The dollars of a counts table's row: of its counts as shown, and on SQL_SMALLEST
    shared by the tasks its name says when it names Cloud SQL."""
    dollars = per_million(shown(usage))
    found = _ON_SQL.search(name)
    return on_sql(dollars, SQL_SMALLEST, int(found[1]) * MILLION) if found else dollars


def row(name: str, dollars: Dollars) -> str:
    return (
        f"| {name} | ${dollars.database:.2f} | ${dollars.cloud_tasks:.2f} | "
        f"${dollars.requests:.2f} | ${dollars.compute_busy:.2f}-{dollars.compute_alone:.2f} | "
        f"**${dollars.low:.2f}-{dollars.high:.2f}** |"
    )


HEADER = (
    "| per million | database | Cloud Tasks | requests | CPU and memory (busy-alone) | total |\n"
    "|---|---|---|---|---|---|"
)
