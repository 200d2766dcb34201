"""The A2A-Extensions service parameter: which of the agent's extensions a request activates.

A client names the extensions it wants for one request in the `A2A-Extensions` header (1.0;
`X-A2A-Extensions` from 0.3 clients): URIs separated by commas, possibly over several header
lines. The agent activates the ones its handler module declares (EXTENSIONS) and ignores the
others, as the spec says of unsupported ones; the answer echoes the activated ones in the
header(s) the client used. A message is recorded with the extensions its request activated
(in its `extensions`), so its turn knows them wherever it runs (in the request or on the
worker).

A required extension that a message's request does not activate refuses the message:
ExtensionSupportRequiredError (-32008) for 1.0 and 0.3 clients (0.3 defines no code of its own
for it; its schema admits any JSON-RPC error), InvalidRequestError for v0.1 clients, whose spec
text gave -32008 another meaning. Reads of tasks and push configs are not refused.

The header values together hold at most MAX_HEADER_CHARS characters and MAX_URIS URIs: more
is a client error naming the limit, rather than a cut that could drop a required extension.

The kit has extensions of its own (`kit`), which the card lists beside the module's and a
request activates alike; they change answers, never a turn, so they are not recorded on the
message. DELIVERY_STATUS: v1.0's TaskPushNotificationConfig has no field for a config's
delivery failure (v0.x answers carry it as `metadata`); a 1.0 Get or List of push configs
that activates it gets `metadata: {"<its URI>": {"lastError", "failedAt"}}` on each config
whose queue gave up, the A2A place of an extension's data. Without it, the answer keeps the
strict 1.0 shape.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from shared.agent import KIT_EXTENSIONS, Extension
from shared.errors import A2AError, ExtensionSupportRequiredError, InvalidRequestError
from shared.frozen import frozen
from shared.model import Message

HEADER = "A2A-Extensions"
LEGACY_HEADER = "X-A2A-Extensions"  # the 0.3 name
HEADERS = (HEADER, LEGACY_HEADER)
MAX_URIS = 64
MAX_HEADER_CHARS = 16384
_WHITESPACE = " \t"  # HTTP's optional whitespace around list elements

DELIVERY_STATUS = Extension(
    uri=f"{KIT_EXTENSIONS}ext:push-delivery-status:v1",
    description=(
        "Push notification configs read with A2A 1.0 (Get, List) carry their delivery "
        "failure, once the agent's retries gave up: metadata[<this URI>] = {lastError, "
        "failedAt}. Nothing else changes; the next event or an update of the config retries."
    ),
)


def kit(push_notifications: bool) -> tuple[Extension, ...]:
    """The kit's own extensions this deployment offers (A2A_PUSH_NOTIFICATIONS)."""
    return (DELIVERY_STATUS,) if push_notifications else ()


def requested(values: Sequence[str]) -> frozenset[str]:
    """The URIs a request names in its header values (empty list elements are allowed, as in
    every HTTP list). Raises InvalidRequestError over the limits."""
    size = sum(len(v) for v in values)
    if size > MAX_HEADER_CHARS:
        raise InvalidRequestError(
            f"the {HEADER} header has {size} characters; the limit is {MAX_HEADER_CHARS}: "
            "name only extensions the agent card lists",
            field=HEADER,
        )
    uris = frozenset(
        uri
        for value in values
        for element in value.split(",")
        if (uri := element.strip(_WHITESPACE))
    )
    if len(uris) > MAX_URIS:
        raise InvalidRequestError(
            f"the {HEADER} header names {len(uris)} extensions; the limit is {MAX_URIS}: "
            "name only extensions the agent card lists",
            field=HEADER,
        )
    return uris


@frozen
class Activation:
    """The extensions one request activates, and the required ones it leaves out."""

    active: tuple[str, ...] = ()  # in the order the module declares them
    missing: tuple[str, ...] = ()  # required, not activated
    headers: tuple[str, ...] = ()  # the header names the client used
    own: tuple[str, ...] = ()  # the kit's extensions activated (`kit`)

    def echo(self) -> dict[str, str]:
        """The answer's headers: the activated URIs under each name the client used."""
        if not self.active and not self.own:
            return {}
        return {name: ",".join((*self.active, *self.own)) for name in self.headers}

    def require(self, version: str) -> None:
        """Refuse a message whose request leaves out a required extension (see the module
        docstring for the error of each version)."""
        if not self.missing:
            return
        header = LEGACY_HEADER if version == "0.3" else HEADER
        detail = (
            f"this agent requires the extension {', '.join(self.missing)}: send "
            f"{header}: {','.join(self.missing)} after implementing it (the agent card's "
            "capabilities.extensions describes it)"
        )
        error: A2AError
        if version == "0.1":
            error = InvalidRequestError(detail, field=header)
        else:
            error = ExtensionSupportRequiredError(
                detail, metadata={"extensions": ",".join(self.missing)}
            )
        raise error

    def record(self, message: Message) -> Message:
        """The message with the activated extensions added to its own `extensions`."""
        added = [uri for uri in self.active if uri not in message.extensions]
        if not added:
            return message
        return replace(message, extensions=(*message.extensions, *added))


_NOTHING = Activation()  # what most requests activate: one value for all (it is frozen)


def activate(
    declared: Sequence[Extension],
    header: Callable[[str], list[str]],
    own: Sequence[Extension] = (),
) -> Activation:
    """What a request activates of the module's `declared` extensions and of the kit's `own`;
    `header(name)` gives all values of one request header. Raises InvalidRequestError when
    the header breaks its limits."""
    found = [(name, listed) for name in HEADERS if (listed := header(name))]
    if not found:  # most requests: nothing asked, only the required ones missing
        missing = tuple(e.uri for e in declared if e.required)
        return Activation(missing=missing) if missing else _NOTHING
    used = tuple(name for name, _ in found)
    asked = requested([value for _, listed in found for value in listed])
    return Activation(
        active=tuple(e.uri for e in declared if e.uri in asked),
        missing=tuple(e.uri for e in declared if e.required and e.uri not in asked),
        headers=used,
        own=tuple(e.uri for e in own if e.uri in asked),
    )
