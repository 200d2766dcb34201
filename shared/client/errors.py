"""How the CLI fails: one `ClientError` per failure, named as the A2A CLI specification v0.2
names it (its §11.4 and Appendix D), with a hint and the exit status it maps to (§11.6).

Two layers, never blurred: a failure the protocol names carries A2A's own error name
(`TaskNotFoundError`, with the JSON-RPC code as `a2aCode`); a failure of the CLI's own, an
`A2ACLI_ERR_*` code. The kit's own codes, where neither fits, use the `A2AFN_` prefix (the
specification forbids inventing `A2ACLI_ERR_*` ones). A task that ends failed, rejected or
waiting for input is no error at all: it is the agent's outcome, reported with exit 0.
"""

from __future__ import annotations

from typing import Any

USAGE = "A2ACLI_ERR_USAGE"
CARD_NOT_FOUND = "A2ACLI_ERR_CARD_NOT_FOUND"
CARD_INVALID = "A2ACLI_ERR_CARD_INVALID"
UNREACHABLE = "A2ACLI_ERR_UNREACHABLE"
CREDENTIALS_MISSING = "A2ACLI_ERR_CREDENTIALS_MISSING"
AUTH_FAILED = "A2ACLI_ERR_AUTH_FAILED"
TIMEOUT = "A2ACLI_ERR_TIMEOUT"
INTERNAL = "A2ACLI_ERR_INTERNAL"
# The kit's own: `card get --verify` found a signature it cannot trust (A2A §8.4).
SIGNATURE_UNVERIFIED = "A2AFN_SIGNATURE_UNVERIFIED"

# Exit statuses (§11.6): 0 success, 1 failure, 2 usage; 3 unreachable, 4 authentication,
# 5 timeout (the reserved ones, all implemented); 130 interrupted (the shell's convention).
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXITS = {
    USAGE: EXIT_USAGE,
    CARD_NOT_FOUND: 3,
    UNREACHABLE: 3,
    CREDENTIALS_MISSING: 4,
    AUTH_FAILED: 4,
    TIMEOUT: 5,
}

# JSON-RPC and A2A error codes and their names (A2A §3.3.2, a2a-wire.md section 3).
ERROR_NAMES = {
    -32700: "JSONParseError",
    -32600: "InvalidRequestError",
    -32601: "MethodNotFoundError",
    -32602: "InvalidParamsError",
    -32603: "InternalError",
    -32001: "TaskNotFoundError",
    -32002: "TaskNotCancelableError",
    -32003: "PushNotificationNotSupportedError",
    -32004: "UnsupportedOperationError",
    -32005: "ContentTypeNotSupportedError",
    -32006: "InvalidAgentResponseError",
    -32007: "ExtendedAgentCardNotConfiguredError",
    -32008: "ExtensionSupportRequiredError",
    -32009: "VersionNotSupportedError",
}
TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
UNSUPPORTED_OPERATION = -32004


class ClientError(Exception):
    """A failure: the message is one line fit for a terminal. `error` is its name (an A2A
    error or an `A2ACLI_ERR_*` code), `hint` the next step, `code` the JSON-RPC error code or
    HTTP status behind it (the envelope's `a2aCode`); `retryable` says a second try may work
    (the agent could not be reached, or failed on its side)."""

    def __init__(
        self,
        message: str,
        *,
        error: str = INTERNAL,
        hint: str | None = None,
        code: int | None = None,
        retryable: bool = False,
    ) -> None:
        super().__init__(message)
        self.error = error
        self.hint = hint
        self.code = code
        self.retryable = retryable

    @property
    def exit_status(self) -> int:
        return EXITS.get(self.error, EXIT_FAILURE)

    def envelope(self) -> dict[str, Any]:
        """The specification's error object (its Appendix B)."""
        return {
            "error": {
                "code": self.error,
                "message": str(self),
                "hint": self.hint,
                "a2aCode": self.code,
            }
        }


class StreamInterrupted(ClientError):
    """A stream ended without its end (the connection dropped): resubscribe to go on."""

    def __init__(self, message: str) -> None:
        super().__init__(message, error=UNREACHABLE, retryable=True)


def protocol_error(method: str, error: dict[str, Any]) -> ClientError:
    """A JSON-RPC error answer as the A2A error it names."""
    code = error.get("code")
    number = code if isinstance(code, int) and not isinstance(code, bool) else None
    name = ERROR_NAMES.get(number, INTERNAL) if number is not None else INTERNAL
    message = str(error.get("message") or "no message")
    return ClientError(f"{method}: {name} ({code}): {message}", error=name, code=number)
