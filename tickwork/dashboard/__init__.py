"""The web dashboard: an ASGI application (Starlette, Jinja2 templates, no build step)
over one ``App``'s backend. ``create_dashboard(app)`` returns it, to mount in an ASGI
application of one's own; ``tickwork dashboard`` serves it with uvicorn. Needs the
``dashboard`` extra."""

from tickwork.api.security import Access, Guard, HostChecked
from tickwork.dashboard.pages import create_dashboard

__all__ = ["Access", "Guard", "HostChecked", "create_dashboard"]
