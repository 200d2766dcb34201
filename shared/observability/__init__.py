"""Logs, traces and metrics: what an operator sees of every request, worker turn and push
delivery (docs/observability.md).

- `context.py`: the correlation of one unit of work (trace, span, the fields of its log line)
  in a ContextVar, and the trace headers it is read from and written to;
- `logs.py`: the JSON lines Cloud Logging reads, the human lines of local runs, and set-up;
- `work.py`: one unit of work opened, traced and written as one line (a stream's when it ends);
- `tracing.py`: OpenTelemetry spans, only when A2A_TRACING asks for them (the `otel` extra);
- `store.py`: a TaskStore decorator tracing each store call (wired only with tracing on).

Nothing here imports OpenTelemetry unless tracing is on: off, it costs nothing at import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shared.settings import Settings


def setup(settings: Settings) -> None:
    """The process's logging (A2A_LOG_FORMAT), owner tags' key and tracing (A2A_TRACING):
    once, where a function starts (functions/main.py). Raises SettingsError when tracing
    is asked for without the otel extra."""
    from shared.observability import context, logs, tracing
    from shared.settings import SettingsError

    logs.configure(settings.log_format, project=settings.project)
    context.set_owner_key(settings.log_owner_key)
    try:
        tracing.start(settings.tracing, project=settings.project)
    except tracing.TracingUnavailable as exc:
        raise SettingsError(str(exc)) from None
