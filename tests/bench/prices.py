"""Google Cloud's list prices that `make bench`'s cost table multiplies its counts by: one
dated table, each price with the page it was read from.

Region us-central1 (Iowa), where `make deploy` puts the functions, the queues and (unless
`firestore_location` says otherwise) the Firestore database: a regional database, Firestore's
Standard edition; Cloud Run's Tier 1 prices with request-based billing, which is how a
Cloud Run function (`gcloud functions deploy --gen2`, infra/resources.py) is billed. USD.

The free tiers are left out (a bill past them: Firestore's 50,000 reads and 20,000 writes and
deletes a day, Cloud Run's first 180,000 vCPU-seconds, 360,000 GiB-seconds and 2 million
requests a month, Cloud Tasks' first million operations a month); TTL deletes have none
(Firestore's pricing page says so).
"""

from __future__ import annotations

from dataclasses import dataclass

PRICES_AS_OF = "2026-12-02"
REGION = "us-central1"

FIRESTORE = "https://cloud.google.com/firestore/pricing"
CLOUD_RUN = "https://cloud.google.com/run/pricing"
CLOUD_TASKS = "https://cloud.google.com/tasks/pricing"
CLOUD_SQL = "https://cloud.google.com/sql/pricing"


@dataclass(frozen=True)
class Price:
    usd: float  # dollars for `per` units
    per: int
    unit: str
    source: str

    @property
    def each(self) -> float:
        return self.usd / self.per


READ = Price(0.03, 100_000, "Firestore document read", FIRESTORE)
WRITE = Price(0.09, 100_000, "Firestore document write", FIRESTORE)
DELETE = Price(0.01, 100_000, "Firestore document delete (TTL deletes included)", FIRESTORE)
# Request-based billing: CPU and memory while an instance handles at least one request.
VCPU_SECOND = Price(0.000024, 1, "Cloud Run vCPU-second, request-based", CLOUD_RUN)
GIB_SECOND = Price(0.0000025, 1, "Cloud Run GiB-second, request-based", CLOUD_RUN)
REQUEST = Price(0.40, 1_000_000, "Cloud Run request", CLOUD_RUN)
# An API call (a task's creation) or a push delivery attempt, per 32 KB of task.
TASKS_OPERATION = Price(0.40, 1_000_000, "Cloud Tasks billable operation", CLOUD_TASKS)
# The SDK's database task store on Cloud SQL for PostgreSQL, Enterprise edition, dedicated core.
SQL_VCPU_HOUR = Price(0.0413, 1, "Cloud SQL vCPU-hour (Enterprise)", CLOUD_SQL)
SQL_GB_HOUR = Price(0.007, 1, "Cloud SQL memory GB-hour (Enterprise)", CLOUD_SQL)
SQL_SSD_GB_MONTH = Price(0.17, 1, "Cloud SQL SSD storage GB-month", CLOUD_SQL)

ALL = (
    READ,
    WRITE,
    DELETE,
    VCPU_SECOND,
    GIB_SECOND,
    REQUEST,
    TASKS_OPERATION,
    SQL_VCPU_HOUR,
    SQL_GB_HOUR,
    SQL_SSD_GB_MONTH,
)


def table() -> str:
    """The prices as docs/cost.md shows them."""
    lines = ["| price | USD | per | source |", "|---|---|---|---|"]
    for price in ALL:
        usd = f"{price.usd:.7f}".rstrip("0").rstrip(".")  # 0.000024, not 2.4e-05
        lines.append(f"| {price.unit} | ${usd} | {price.per:,} | {price.source} |")
    return "\n".join(lines)
