"""The protocol's errors as values: JSON-RPC's standard codes and A2A's -32001..-32009.

Each error knows its code, its default message (the spec's exact string), its ErrorInfo
reason, its HTTP status and google.rpc status name (what the v1.0 HTTP+JSON binding answers),
and optional detail (the field at fault, the limit exceeded). The
dialects decide how the detail is shaped on the wire.
"""

from __future__ import annotations

from typing import Any, ClassVar


class A2AError(Exception):
    code: ClassVar[int]
    default_message: ClassVar[str]
    reason: ClassVar[str]
    # The v1.0.1 mapping (wire reference section 3): most A2A errors are a failed precondition.
    http_status: ClassVar[int] = 400
    grpc_status: ClassVar[str] = "FAILED_PRECONDITION"

    def __init__(
        self,
        detail: str | None = None,
        *,
        field: str | None = None,
        metadata: dict[str, str] | None = None,
    ) -> None:
        self.detail = detail
        self.field = field
        self.metadata = dict(metadata or {})
        super().__init__(self.message)

    @property
    def message(self) -> str:
        """The spec's message, followed by what exactly went wrong when we know it."""
        return f"{self.default_message}: {self.detail}" if self.detail else self.default_message

    def info(self) -> dict[str, Any]:
        """Detail fields for the v0.x free-form `data` member (empty when there are none)."""
        info: dict[str, Any] = {}
        if self.field:
            info["field"] = self.field
        if self.detail:
            info["detail"] = self.detail
        info.update(self.metadata)
        return info


class JSONParseError(A2AError):
    code = -32700
    default_message = "Invalid JSON payload"
    reason = "INVALID_JSON"
    grpc_status = "INVALID_ARGUMENT"


class InvalidRequestError(A2AError):
    code = -32600
    default_message = "Request payload validation error"
    reason = "INVALID_REQUEST"
    grpc_status = "INVALID_ARGUMENT"


class MethodNotFoundError(A2AError):
    code = -32601
    default_message = "Method not found"
    reason = "METHOD_NOT_FOUND"
    http_status = 404
    grpc_status = "NOT_FOUND"  # an unknown method, or an unknown path of the REST binding


class InvalidParamsError(A2AError):
    code = -32602
    default_message = "Invalid parameters"
    reason = "INVALID_PARAMS"
    grpc_status = "INVALID_ARGUMENT"


class InternalError(A2AError):
    code = -32603
    default_message = "Internal error"
    reason = "INTERNAL"
    http_status = 500
    grpc_status = "INTERNAL"


class TaskNotFoundError(A2AError):
    code = -32001
    default_message = "Task not found"
    reason = "TASK_NOT_FOUND"
    http_status = 404
    grpc_status = "NOT_FOUND"


class TaskNotCancelableError(A2AError):
    code = -32002
    default_message = "Task cannot be canceled"
    reason = "TASK_NOT_CANCELABLE"


class PushNotificationNotSupportedError(A2AError):
    code = -32003
    default_message = "Push Notification is not supported"
    reason = "PUSH_NOTIFICATION_NOT_SUPPORTED"


class UnsupportedOperationError(A2AError):
    code = -32004
    default_message = "This operation is not supported"
    reason = "UNSUPPORTED_OPERATION"


class ContentTypeNotSupportedError(A2AError):
    code = -32005
    default_message = "Incompatible content types"
    reason = "CONTENT_TYPE_NOT_SUPPORTED"
    # 1.0.1's 400 (1.0.0 said 415, which the pinned TCK still expects: README, Conformance).
    grpc_status = "INVALID_ARGUMENT"


class InvalidAgentResponseError(A2AError):
    code = -32006
    default_message = "Invalid agent response"
    reason = "INVALID_AGENT_RESPONSE"
    http_status = 500
    grpc_status = "INTERNAL"


class ExtendedAgentCardNotConfiguredError(A2AError):
    code = -32007
    default_message = "Authenticated Extended Card is not configured"
    reason = "EXTENDED_AGENT_CARD_NOT_CONFIGURED"


class ExtensionSupportRequiredError(A2AError):
    code = -32008
    default_message = "Extension support required"
    reason = "EXTENSION_SUPPORT_REQUIRED"


class VersionNotSupportedError(A2AError):
    code = -32009
    default_message = "Version not supported"
    reason = "VERSION_NOT_SUPPORTED"


class StreamLimitError(A2AError):
    """This instance holds as many streams as it may (JSON-RPC's server-error range)."""

    code = -32000
    default_message = "Too many open streams"
    reason = "RESOURCE_EXHAUSTED"
    http_status = 503
    grpc_status = "UNAVAILABLE"


class LiveTaskQuotaError(A2AError):
    """The owner has as many live (not terminal) tasks as A2A_MAX_LIVE_TASKS_PER_OWNER allows:
    a send that would start one more in the background is refused before anything is
    written (JSON-RPC's server-error range, as the streams' limits)."""

    SETTING = "A2A_MAX_LIVE_TASKS_PER_OWNER"
    code = -32000
    default_message = "Too many live tasks"
    reason = "RESOURCE_EXHAUSTED"
    http_status = 429
    grpc_status = "RESOURCE_EXHAUSTED"

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"you have {limit} or more tasks not ended yet (submitted, working, input-required or "
            f"auth-required), the limit ({self.SETTING}={limit}) for a send that starts one "
            "in the background; wait for some to end, cancel those you no longer need, send "
            "this one blocking, or ask the operator to raise the limit",
            metadata={"limit": str(limit), "setting": self.SETTING},
        )
        self.limit = limit


class PayloadTooLargeError(InvalidRequestError):
    """A body over A2A_MAX_BODY_BYTES: an invalid request, answered with HTTP 413."""

    http_status = 413


class UnauthenticatedError(InvalidRequestError):
    """No valid credentials: an invalid request to JSON-RPC, HTTP 401 on every binding."""

    http_status = 401
    grpc_status = "UNAUTHENTICATED"


class PushConfigQuotaError(InvalidParamsError):
    """The owner has as many push configs, on all its tasks, as A2A_MAX_PUSH_CONFIGS_PER_OWNER
    allows; a push config store refuses the new one in the step that would write it."""

    SETTING = "A2A_MAX_PUSH_CONFIGS_PER_OWNER"

    def __init__(self, count: int, limit: int) -> None:
        super().__init__(
            f"you have {count} push notification configs on your tasks, the limit "
            f"({self.SETTING}={limit}); delete one you no longer need (or replace one by its "
            "id), or ask the operator to raise the limit",
            metadata={"limit": str(limit), "setting": self.SETTING},
        )
        self.count, self.limit = count, limit
