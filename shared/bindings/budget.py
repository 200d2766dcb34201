"""The bytes an instance holds for the requests in flight, and each owner's share of them.

The front (shared.bindings.asgi) counts here, on the event loop, the request bodies it reads
(from their first byte until the app has parsed them) and the answers it writes (from the
moment they are made until their last byte is taken by the client): A2A_MAX_BUFFERED_BYTES
bounds them all, A2A_MAX_OWNER_BUFFERED_BYTES one owner's (known once the caller is
authenticated; what is read before, the first message of a body, counts against the instance
alone). So tiny requests that ask for big answers and never read them, or streams opened with
bodies padded to the limit, hold at most their owner's share, never the instance's room.

An answer is never refused for its size alone: when its owner (or the instance) holds nothing
else, it is let through whatever its size, so every stored value can be read back.
"""

from __future__ import annotations


class Budget:
    """Bytes held on the loop: `held` in all, `owners` by owner (only those holding some)."""

    def __init__(self, limit: int, owner_limit: int) -> None:
        self.limit = limit  # A2A_MAX_BUFFERED_BYTES
        self.owner_limit = owner_limit  # A2A_MAX_OWNER_BUFFERED_BYTES
        self.held = 0
        self.owners: dict[str, int] = {}

    def take(self, size: int, owner: str | None, *, alone: bool = False) -> str | None:
        """Count `size` more bytes (the owner's, when known): None when they fit, else why
        they do not (then nothing is counted). `alone`: they fit whatever their size when
        nothing else is held (by the owner; by the instance)."""
        owned = 0 if owner is None else self.owners.get(owner, 0)
        if self.held + size > self.limit and not (alone and self.held == 0):
            return (
                f"this instance holds {self.held} bytes of requests and answers in flight, as "
                f"many as it may (A2A_MAX_BUFFERED_BYTES={self.limit}): retry in a moment"
            )
        if owner is not None and owned + size > self.owner_limit and not (alone and owned == 0):
            return (
                f"your requests in flight hold {owned} bytes of bodies and answers on this "
                f"instance, as many as one caller may (A2A_MAX_OWNER_BUFFERED_BYTES="
                f"{self.owner_limit}): read the answers you asked for, or retry in a moment"
            )
        self.held += size
        if owner is not None and size:
            self.owners[owner] = owned + size
        return None

    def give(self, size: int, owner: str | None) -> None:
        """Let go of `size` bytes counted by `take` for `owner`."""
        self.held -= size
        if owner is not None and size:
            left = self.owners[owner] - size
            if left:
                self.owners[owner] = left
            else:
                del self.owners[owner]
