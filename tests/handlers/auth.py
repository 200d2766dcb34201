"""A handler that waits in auth-required on its first turn and completes on the next."""

from __future__ import annotations

from shared.agent import Context


def handle(ctx: Context) -> None:
    if len(ctx.history) == 1:
        ctx.require_auth("Sign in at https://example.com/auth, then tell me")
    else:
        ctx.complete("Signed in, vault open")
