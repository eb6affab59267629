"""An app's settings, given in code: ``App(settings=Settings.load(trace_runs="child"))``
(``Settings.load``: the defaults, then ``tickwork.toml``, then the ``TICKWORK_*``
environment variables, then its arguments; ``Settings(...)``: its arguments and the
defaults only). Every field is documented on the class."""

from tickwork.scheduler.settings import Settings

__all__ = ["Settings"]
