"""A2A_AUTH=google: a Google-signed ID token in `Authorization: Bearer`, owner = its e-mail.

What callers of an IAM-protected Cloud Run function already send (a service account's token,
`gcloud auth print-identity-token`), so IAM decides who may call and this gives each caller
its own tasks. The token is checked with google-auth (shared.tasks_auth.GoogleTokens: Google's
certificates, cached and fetched again for an unknown key id): signature, issuer
(accounts.google.com), expiry, and an audience fixed in the settings (A2A_AUDIENCE, a list,
and A2A_PUBLIC_URL), never one read from the request.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from shared import tasks_auth
from shared.clock import SYSTEM, Clock
from shared.identity import (
    MAX_OWNER_LENGTH,
    AuthenticationError,
    Headers,
    Principal,
    bearer_challenge,
)
from shared.tasks_auth import GoogleTokens, TokenRefused, bearer

log = logging.getLogger("a2a.identity")


class GoogleIdTokens:
    def __init__(
        self, audiences: Sequence[str], certs_url: str | None = None, clock: Clock = SYSTEM
    ) -> None:
        url = certs_url or tasks_auth.GOOGLE_CERTS_URL
        self._audiences = tuple(audiences)
        self._tokens = GoogleTokens(None, lambda: tasks_auth.fetch_google_certs(url), clock)

    def authenticate(self, header: Headers) -> Principal:
        authorization = header("Authorization")
        if not authorization:
            raise AuthenticationError(
                "send a Google-signed ID token for this agent's URL in the Authorization "
                "header: `Authorization: Bearer $(gcloud auth print-identity-token)`",
                bearer_challenge(),
            )
        try:
            claims = self._tokens.verify(bearer(authorization), self._audiences)
        except TokenRefused as exc:
            log.info("refused a Google ID token: %s", exc)
            raise AuthenticationError(
                f"the Google ID token was refused ({exc.reason}); send a valid one",
                bearer_challenge("invalid_token", exc.reason),
            ) from None
        email = claims.get("email")
        if not isinstance(email, str) or not email or len(email) > MAX_OWNER_LENGTH:
            reason = "no e-mail"
        elif claims.get("email_verified") is not True:
            reason = "e-mail not verified"
        else:
            return Principal(email, authenticated=True)
        raise AuthenticationError(
            f"the Google ID token was refused ({reason}); mint it with the email scope",
            bearer_challenge("invalid_token", reason),
        )
