"""The pipeline page's task table, built as text: the same HTML a template loop over the status makes."""

from __future__ import annotations

import jinja2
import pytest

from vardiya.pipeline import Pipeline, Stage, Static, build_graph, same
from vardiya.ui.task_table import task_rows

# The rows as the page's template wrote them before they were built in Python: the reference.
REFERENCE = jinja2.Environment(autoescape=True).from_string(
    "{% for task, state in tasks.items() %}"
    '<tr data-task="{{ task }}"><td><a href="/pipelines/{{ name|urlencode }}/tasks/{{ task|urlencode }}">{{ task }}</a>'
    '{% if task in stale %} <span class="muted">(stale)</span>{% endif %}</td><td data-state>{{ state }}</td>\n'
    '<td><a href="/pipelines/{{ name|urlencode }}/rerun?task={{ task|urlencode }}">rerun… (blast radius first)</a></td></tr>'
    "{% endfor %}"
)
KEYS = ("north", "a&b", 'say "hi"', "<p>", "sp ace", "q?u=1#f", "50%", "ünï/cöde", "it's")


def _noop(context: object) -> None: ...


@pytest.mark.parametrize("name", ["meters", "m-2.v_3"])
def test_the_rows_are_the_templates_rows_for_any_names_states_and_stale_marks(name: str) -> None:
    graph = build_graph(Pipeline(name, [
        Stage(name="load", fn=_noop, partitions=Static(keys=KEYS)),
        Stage(name="clean", fn=_noop, partitions=Static(keys=KEYS), depends_on={"load": same()}),
    ]))
    states = ["succeeded", "failed", "blocked", "pending", "running", "<odd>"]
    for round_number in range(3):  # the per-task text is kept with the graph: later calls must not keep states
        tasks = {task: states[(number + round_number) % len(states)] for number, task in enumerate(graph.order)}
        stale = graph.order[round_number::4]
        rows = task_rows(graph, tasks, stale)
        assert str(rows) == REFERENCE.render(name=name, tasks=tasks, stale=stale)
        assert rows.count("(stale)") == len(stale) and rows.count("<tr ") == len(graph)


def test_rows_follow_the_order_given_and_show_only_the_tasks_given() -> None:
    graph = build_graph(Pipeline("p", [Stage(name="load", fn=_noop, partitions=Static(keys=("a", "b", "c")))]))
    rows = str(task_rows(graph, {"load@c": "failed", "load@a": "succeeded"}, ()))
    assert rows.index('data-task="load@c"') < rows.index('data-task="load@a"') and "load@b" not in rows
    assert str(task_rows(graph, {}, ())) == ""
