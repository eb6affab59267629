"""One list of task options: ``@app.task``'s keywords, ``TaskClass``'s attributes and the
docs of both name the same options."""

from __future__ import annotations

from tickwork import App
from tickwork.scheduler.model.task_keywords import TASK_KEYWORDS, TaskKeywords
from tickwork.scheduler.model.tasks import TaskClass


def test_a_task_class_has_an_attribute_for_every_option() -> None:
    assert [name for name in TASK_KEYWORDS if not hasattr(TaskClass, name)] == []


def test_the_docs_name_every_option() -> None:
    for doc in (TaskKeywords.__doc__, App.task.__doc__, TaskClass.__doc__):
        assert doc is not None
        assert [name for name in TASK_KEYWORDS if f"``{name}``" not in doc] == []


def test_options_reach_the_task() -> None:
    app = App("sqlite:///:memory:")

    @app.task(queue="q", retries=3, priority=2, history=True, time_limit=5.0)
    def f() -> None: ...

    options = f.options
    assert (options.queue, options.retry.retries, options.priority) == ("q", 3, 2)
    assert options.history and options.time_limit_s == 5.0
