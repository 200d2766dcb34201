"""Which media types an agent takes in a message's parts: its declared input modes, read as
media ranges (`image/png`, `image/*`, `*/*`), and the type each part has or implies.

A part's type is its `mediaType` when it has one, else what its kind implies (text:
`text/plain`; data: `application/json`); a file without a type is not judged (nothing says
what it is). A2A 1.0.1 (S1 §5.4) answers a part the agent does not take with
ContentTypeNotSupportedError (-32005, HTTP 400).
"""

from __future__ import annotations

from shared.errors import ContentTypeNotSupportedError
from shared.model import Message, Part

_IMPLIED = {"text": "text/plain", "data": "application/json"}


def _bare(media_type: str) -> str:
    """A media type without its parameters, lowercase: `Text/Plain; charset=utf-8` -> text/plain."""
    return media_type.split(";", 1)[0].strip().lower()


def takes(modes: frozenset[str], media_type: str) -> bool:
    """Whether one of the media ranges `modes` (bare, lowercase) matches the media type."""
    bare = _bare(media_type)
    kind = bare.split("/", 1)[0]
    return bare in modes or f"{kind}/*" in modes or "*/*" in modes or "*" in modes


def part_type(part: Part) -> str | None:
    """The part's media type, given or implied by its kind; None for a file of no type."""
    return part.media_type or _IMPLIED.get(part.kind)


def check(modes: frozenset[str] | None, message: Message) -> None:
    """Refuse a message with a part of a type the modes do not take (None: any is taken)."""
    if modes is None:
        return
    for i, part in enumerate(message.parts):
        media_type = part_type(part)
        if media_type is not None and not takes(modes, media_type):
            listed = ", ".join(sorted(modes))
            raise ContentTypeNotSupportedError(
                f"part {i} is {_bare(media_type)[:100]}, which this agent does not take "
                f"(it takes {listed}: the agent card's defaultInputModes and its skills' "
                "inputModes)",
                field="message.parts",
                metadata={"mediaType": _bare(media_type)[:100]},
            )


def declared(
    default: tuple[str, ...], skills: tuple[tuple[str, ...], ...]
) -> frozenset[str] | None:
    """The media ranges a module's declarations take (its AGENT's input modes and every
    skill's), None when it declares none: it then takes any part."""
    modes = {_bare(mode) for mode in default}
    for skill_modes in skills:
        modes.update(_bare(mode) for mode in skill_modes)
    return frozenset(modes) if modes else None
