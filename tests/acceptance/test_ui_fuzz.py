"""The dashboard's OpenAPI document fuzzed with schemathesis: bad input gets a 4xx with a message,
never a 500; every answer matches the document. Bounded (a few examples per operation) to stay fast."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from tests.support.dashboard import TOKEN, make_store
from vardiya.app import load_app
from vardiya.store import open_store
from vardiya.ui import Guard, create_app

#: Examples per API operation: enough to reach the refusals, few enough for a CI on 2 cores.
EXAMPLES = 25


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    directory: Path = tmp_path_factory.mktemp("fuzz")
    options = make_store(directory)
    with open_store(options[1], create=False) as store:
        server = create_app(store, load_app(options[3]), Guard.for_server(host="127.0.0.1", environment_token=TOKEN, allowed_hosts=["testserver"]))
        yield schemathesis.openapi.from_asgi("/api/openapi.json", server)
        server.state.ui.runs.wait(60)  # a rerun or resume the fuzz started ends before its store closes


def test_the_api_refuses_bad_input_without_a_server_error(api_schema: Any) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 8  # every endpoint of /api/ is in the document, so every one is fuzzed
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
        def answers_without_a_server_error(case: schemathesis.Case) -> None:
            response = case.call(headers={"Authorization": f"Bearer {TOKEN}"})
            said = (case.method, case.formatted_path, case.query, case.body, response.text)
            assert response.status_code < 500, said
            if response.status_code >= 400:
                document = response.json()
                assert document.get("error") or document.get("detail"), said

        answers_without_a_server_error()
