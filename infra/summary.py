"""What a deploy creates, in words, from the plan itself: README's lists are this text.

`python -m infra summary` prints the Markdown block README.md holds between its
`<!-- infra summary -->` markers (tests/infra/test_summary.py compares the two), so the
README cannot name a role, an account or a TTL collection group the plan does not have.
"""

from __future__ import annotations

from collections import defaultdict

from infra.plan import DEPLOY_ORDER, grants, invokers
from infra.resources import Binding
from infra.settings import Settings

BEGIN = "<!-- infra summary: python -m infra summary writes this block -->"
END = "<!-- /infra summary -->"
TRACING = '`[env] A2A_TRACING = "gcp"`'


def _where(binding: Binding) -> str:
    label = binding.target.label
    if label.startswith("project "):
        held = binding.condition
        return f"the project ({held.title}: `{held.expression}`)" if held else "the whole project"
    kind, _, name = label.rpartition(" ")
    return f"{kind} `{name}`"


def _roles(bindings: list[Binding]) -> str:
    """`role` on where, where; ... in the plan's order."""
    places: dict[str, list[str]] = defaultdict(list)
    for binding in bindings:
        places[binding.role].append(_where(binding))
    return "; ".join(f"`{role}` on {', '.join(where)}" for role, where in places.items())


def _bindings(settings: Settings) -> list[Binding]:
    return [*grants(settings), *(b for role in DEPLOY_ORDER for b in invokers(settings, role))]


def summary(settings: Settings) -> str:
    """The TTL policies and each account's roles of a deploy with these settings."""
    groups = [f"`{group}`" for group in settings.ttl_collection_groups]
    lines = [
        BEGIN,
        f"- A TTL policy on `{settings.ttl_field}` for the collection groups "
        f"{', '.join(groups[:-1])} and {groups[-1]} (TTL removes one document, never its "
        f"subcollections, so each carries `{settings.ttl_field}`).",
    ]
    plain = _bindings(settings)
    traced = _bindings(settings.model_copy(update={"env": {**settings.env, "A2A_TRACING": "gcp"}}))
    accounts = (
        (settings.runtime_email, "`a2a` and `worker` run as it"),
        (settings.deliver_email, "`deliver` runs as it"),
        (settings.invoker_email, "Cloud Tasks and Cloud Scheduler sign their OIDC tokens as it"),
        (settings.build_email, "Cloud Build builds the functions as it"),
    )
    for email, purpose in accounts:
        member = f"serviceAccount:{email}"
        mine = [b for b in plain if b.member == member]
        granted = [b for b in mine if b.present]
        when_traced = [b for b in traced if b.member == member and b.present and b not in granted]
        # Absent on purpose: what tracing adds, or what an earlier version granted.
        revoked = [
            b
            for b in mine
            if not b.present
            and not any(t.role == b.role and t.target == b.target for t in when_traced)
            and b.condition is None
        ]
        text = f"- `{email.split('@')[0]}` ({purpose}): {_roles(granted)}"
        if when_traced:
            text += f"; while {TRACING}, {_roles(when_traced)} (taken away when not)"
        if revoked:
            text += f"; never {_roles(revoked)} (taken away if an earlier deploy granted it)"
        lines.append(text + ".")
    lines.append(END)
    return "\n".join(lines)
