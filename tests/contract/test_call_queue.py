"""The queue of an async call, read apart from the claim's row (issue 16): ``Invoker.status`` and the
store's ``queue_of`` on both backends."""

from __future__ import annotations

import pytest

from vardiya.app import App
from vardiya.errors import InvalidInput
from vardiya.invoke.invoker import Invoker
from vardiya.store import Store


def _app() -> App:
    app = App("office")

    @app.handler("send_mail", queue="mail")
    def send_mail(message: dict[str, str], context: object) -> None: ...

    @app.handler("render_report")
    def render_report(request: dict[str, int], context: object) -> None: ...

    return app


def test_a_call_status_names_its_queue(store: Store) -> None:
    invoker = Invoker(store, _app())
    mail = invoker.submit("send_mail", {"to": "a@example.com"})
    report = invoker.submit("render_report", {"month": 11})
    assert invoker.status(mail).queue == "mail"
    assert invoker.status(report).queue == "default"
    assert store.items.queue_of(mail.id) == "mail"
    assert store.items.queue_of(report.id) == "default"


def test_an_unknown_item_has_no_queue(store: Store) -> None:
    assert store.items.queue_of(999) is None
    with pytest.raises(InvalidInput, match="no async invocation has handle 999"):
        Invoker(store, _app()).status(999)
