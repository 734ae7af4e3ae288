"""Log every client connection with the transport it came over."""

import structlog

from toolkernel import hookimpl

opened = []


@hookimpl
def on_session_start(event):
    opened.append((event.server.name, event.transport, event.session_id))
    structlog.get_logger("sessions").info(
        "session opened", server=event.server.name, transport=event.transport, session=event.session_id
    )
