"""Google identity tokens for IAM-protected agents (`a2a --google`): from Application Default
Credentials (a service account key in GOOGLE_APPLICATION_CREDENTIALS, or the metadata server
on Google Cloud), else from `gcloud auth print-identity-token` (a developer's own login)."""

from __future__ import annotations

import shutil
import subprocess

from shared.client.errors import ClientError

GCLOUD_TIMEOUT = 30.0  # seconds; gcloud refreshes its token over the network


def google_id_token(audience: str) -> str:
    """An ID token addressed to `audience` (the agent's URL), or ClientError with the fix."""
    import google.auth.exceptions
    import google.auth.transport.requests
    import google.oauth2.id_token

    try:
        token: str = google.oauth2.id_token.fetch_id_token(  # type: ignore[no-untyped-call]
            google.auth.transport.requests.Request(), audience
        )
        return token
    except google.auth.exceptions.GoogleAuthError as exc:
        adc_problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    gcloud = shutil.which("gcloud")
    if gcloud is not None:
        try:
            done = subprocess.run(
                [gcloud, "auth", "print-identity-token"],
                capture_output=True,
                text=True,
                timeout=GCLOUD_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ClientError(
                f"`gcloud auth print-identity-token` took more than {GCLOUD_TIMEOUT:.0f} s"
            ) from None
        token = done.stdout.strip()
        if done.returncode == 0 and token and " " not in token:
            return token
        gcloud_problem = (done.stderr.strip().splitlines() or ["no token printed"])[-1]
    else:
        gcloud_problem = "gcloud is not on PATH"
    raise ClientError(
        f"no Google ID token: Application Default Credentials: {adc_problem}; gcloud: "
        f"{gcloud_problem}. Run `gcloud auth login`, or set GOOGLE_APPLICATION_CREDENTIALS to "
        "a service account key file, or pass --token TOKEN"
    )
