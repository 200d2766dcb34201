"""The servers some of `make bench`'s sections run against: `a2a` on the embedded backend, or
on the Firestore emulator with its `worker` or `deliver` behind a queue of the Cloud Tasks
emulator, as deployed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import timedelta

from tests.conftest import Server


@contextmanager
def emulated(
    env: dict[str, str], target: str | None, *, instances: int = 1
) -> Iterator[tuple[Server, ...]]:
    """`instances` `a2a` servers with `env`: on the embedded backend (no target), or on
    Firestore's emulator with `target` (`worker` or `deliver`) in a server of its own, fed by
    its Cloud Tasks queue (`work` or `push`) on the Cloud Tasks emulator."""
    with ExitStack() as stack:
        if target is not None:
            from google.cloud import tasks_v2

            from emulator import start_firestore, start_tasks_emulator

            firestore = stack.enter_context(start_firestore())
            tasks = stack.enter_context(start_tasks_emulator(secret="bench", out=None))
            parent = f"projects/{firestore.project}/locations/local"
            queue = "work" if target == "worker" else "push"
            retry = tasks_v2.RetryConfig(min_backoff=timedelta(seconds=0.1))
            tasks.client().create_queue(
                parent=parent,
                queue=tasks_v2.Queue(name=f"{parent}/queues/{queue}", retry_config=retry),
            )
            env = env | {
                **firestore.env(),
                **tasks.env(),
                "A2A_BACKEND": "firestore",
                "GOOGLE_CLOUD_PROJECT": firestore.project,
                "A2A_TASKS_SERVICE_ACCOUNT": "bench@demo-a2a-functions.iam.gserviceaccount.com",
            }
            function = Server(env, target=target)
            stack.callback(function.stop)
            env |= {f"A2A_{target.upper()}_URL": f"{function.url}/", "A2A_REGION": "local"}
        servers = []
        for _ in range(instances):
            servers.append(Server(env))
            stack.callback(servers[-1].stop)
        yield tuple(servers)
