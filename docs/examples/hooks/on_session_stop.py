"""Drop per-session state when the client goes away."""

from toolkernel import hookimpl

state_by_session = {}  # filled by your own tools or middleware
closed = []


@hookimpl
def on_session_stop(event):
    state_by_session.pop(event.session_id, None)
    closed.append((event.server.name, event.transport))
