"""``vardiya plan`` as a user runs it: the JSON of cli.md, tables for people, bad input one line, exit 2."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from tests.support.cli import assert_one_line_error, run_cli

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "meter_validation"
ROW_KEYS = [
    "model", "batch_size", "policy", "calls", "processed", "extra", "dead_letter", "co_failed", "caller_wait_ms",
    "completion_mean_ms", "completion_p99_ms", "busy_ms", "cost", "fits_limit",
]
SIZES = "1,2,5,10,25,50,100,250,500,1000,2500"


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    """A small night (the first 600 readings: transient and poison ones among them) and the example profile."""
    night = (EXAMPLE / "validation-night.csv").read_text(encoding="utf-8").splitlines()
    (tmp_path / "night.csv").write_text("\n".join(night[:601]) + "\n", encoding="utf-8")
    shutil.copy(EXAMPLE / "profile.toml", tmp_path / "profile.toml")
    return tmp_path


def _plan(cwd: Path, *args: str) -> dict:
    result = run_cli("plan", *args, "--workload", "night.csv", "--profile", "profile.toml", "--json", cwd=cwd)
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("model", ["sync", "async", "stream"])
def test_plan_invocation_prints_the_metrics_of_one_model(inputs: Path, model: str) -> None:
    document = _plan(inputs, "invocation", "--model", model, "--batch-size", "50")
    assert list(document)[: len(ROW_KEYS)] == ROW_KEYS
    assert document["model"] == model
    assert document["extra"] == document["processed"] - 600
    if model == "stream":
        assert (document["batch_size"], document["policy"]) == (50, "retry_batch")
        assert document["co_failed"] == document["dead_letter"] - 2 > 0  # readings 397 and 448 are poison
    else:
        assert (document["batch_size"], document["policy"]) == (None, None)
        assert document["dead_letter"] == (0 if model == "sync" else 2)


def test_plan_invocation_is_deterministic(inputs: Path) -> None:
    args = ("plan", "invocation", "--workload", "night.csv", "--profile", "profile.toml", "--model", "stream",
            "--policy", "bisect", "--dedup", "--json")
    first, second = run_cli(*args, cwd=inputs), run_cli(*args, cwd=inputs)
    assert first.code == second.code == 0 and first.stdout == second.stdout


def test_plan_compare_puts_the_models_and_the_policies_side_by_side(inputs: Path) -> None:
    document = _plan(inputs, "compare", "--batch-size", "50")
    assert document["batch_size"] == 50
    assert [row["model"] for row in document["models"]] == ["sync", "async", "stream"]
    assert [row["policy"] for row in document["policies"]] == ["retry_batch", "bisect", "report_failures"]
    sync, async_, stream = document["models"]
    assert sync["caller_wait_ms"] > async_["caller_wait_ms"] == stream["caller_wait_ms"]
    assert sync["completion_p99_ms"] < async_["completion_p99_ms"] < stream["completion_p99_ms"]
    assert [row["co_failed"] for row in document["policies"]][1:] == [0, 0]


def test_plan_batch_sweep_of_the_example_night(tmp_path: Path) -> None:
    result = run_cli(
        "plan", "batch-sweep", "--workload", str(EXAMPLE / "validation-night.csv"), "--profile",
        str(EXAMPLE / "profile.toml"), "--sizes", SIZES, "--plot", "sweep.svg", "--json", cwd=tmp_path,
    )
    assert result.code == 0, result.stderr
    document = json.loads(result.stdout)
    assert list(document)[:3] == ["rows", "cheapest", "fastest"]
    assert [row["batch_size"] for row in document["rows"]] == [int(size) for size in SIZES.split(",")]
    assert list(document["rows"][0])[: len(ROW_KEYS) + 1] == [*ROW_KEYS, "batch_ms"]
    assert (document["cheapest"], document["fastest"]) == (10, 5)
    too_big = document["rows"][-1]
    assert (too_big["batch_ms"], too_big["fits_limit"]) == (1_000_250, False)
    assert document["plot"] == "sweep.svg"
    assert "<svg" in (tmp_path / "sweep.svg").read_text(encoding="utf-8")


def test_plan_dedup_prints_the_window_against_the_redrive(inputs: Path) -> None:
    document = _plan(inputs, "dedup", "--batch-size", "50")
    assert list(document)[:5] == [
        "window_s", "redrive_after_s", "dead_letter", "reprocessed_without_retention", "reprocessed_with_retention",
    ]
    assert (document["window_s"], document["redrive_after_s"]) == (86_400, 259_200)
    assert document["dead_letter"] == 100  # the two batches of 50 that hold a poison reading
    assert (document["reprocessed_without_retention"], document["reprocessed_with_retention"]) == (98, 0)


def test_tables_for_people(inputs: Path) -> None:
    swept = run_cli("plan", "batch-sweep", "--workload", "night.csv", "--profile", "profile.toml", "--sizes",
                    "1,10,100,2500", cwd=inputs)
    assert swept.code == 0, swept.stderr
    words = " ".join(swept.stdout.split())
    assert "cheapest: batch size" in words and "never recommended: 2500" in words and "too big" in words
    compared = run_cli("plan", "compare", "--workload", "night.csv", "--profile", "profile.toml", cwd=inputs)
    assert compared.code == 0 and "latency moves, it does not vanish" in " ".join(compared.stdout.split())
    deduped = run_cli("plan", "dedup", "--workload", "night.csv", "--profile", "profile.toml", cwd=inputs)
    assert deduped.code == 0 and "with vardiya's retention" in " ".join(deduped.stdout.split())
    one = run_cli("plan", "invocation", "--workload", "night.csv", "--profile", "profile.toml", "--model", "stream",
                  "--batch-size", "2500", cwd=inputs)
    assert one.code == 0 and "does not fit" in one.stdout


HISTORY_APP = '''
from vardiya.app import App
from vardiya.invoke import FixedWait, RetryPolicy

app = App("history")

def validate(record, context):
    if record["id"] % 10 == 0:
        raise ValueError("poison")
    if record["id"] % 7 == 0 and context.attempt == 1:
        raise TimeoutError("again")
    return None

app.handler("validate", model="async", retry=RetryPolicy(max_attempts=3, wait=FixedWait(seconds=0.01)))(validate)
'''


def test_a_workload_from_the_history_of_past_runs(inputs: Path) -> None:
    (inputs / "history_app.py").write_text(textwrap.dedent(HISTORY_APP), encoding="utf-8")
    options = ["--db", f"sqlite:///{inputs / 'h.db'}", "--app", f"{inputs / 'history_app.py'}:app"]
    (inputs / "r.jsonl").write_text("\n".join(json.dumps({"id": i}) for i in range(1, 41)) + "\n")
    assert run_cli("invoke", "submit", "validate", "--payloads", "r.jsonl", *options, cwd=inputs).code == 0
    assert run_cli("worker", "--until-idle", *options, cwd=inputs).code == 0
    result = run_cli("plan", "invocation", "--history", "validate", "--profile", "profile.toml", "--model", "async",
                     "--json", *options, cwd=inputs)
    assert result.code == 0, result.stderr
    document = json.loads(result.stdout)
    # 4 poison (10, 20, 30, 40), 5 transient (7, 14, 21, 28, 35): the same figures as the run itself
    assert (document["unique"], document["dead_letter"], document["calls"]) == (40, 4, 40 + 5 + 2 * 4)


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["invocation", "--model", "stream", "--batch-size", "0"], ["--batch-size must be a whole number of at least 1, got 0"]),
        (["dedup", "--batch-size", "-3"], ["--batch-size must be a whole number of at least 1, got -3"]),
        (["batch-sweep", "--sizes", "1,0,5"], ["every one of --sizes must be a whole number of at least 1, got 0"]),
        (["batch-sweep", "--plot", "chart.gif"], ["use a file name ending in .svg or .png"]),
    ],
)
def test_bad_options_are_one_line_exit_2(inputs: Path, args: list[str], fragments: list[str]) -> None:
    result = run_cli("plan", *args, "--workload", "night.csv", "--profile", "profile.toml", cwd=inputs)
    assert_one_line_error(result, *fragments)
    assert not (inputs / "chart.gif").exists()


def test_bad_inputs_are_one_line_exit_2(inputs: Path) -> None:
    (inputs / "bad.csv").write_text("record,outcome\n1,ok\n2,flaky\n", encoding="utf-8")
    profile = (inputs / "profile.toml").read_text(encoding="utf-8")
    (inputs / "typo.toml").write_text(profile.replace("per_record_ms", "per_recrod_ms"), encoding="utf-8")
    (inputs / "short.toml").write_text(profile.replace("time_limit_s = 900", ""), encoding="utf-8")
    cases = [
        (["--workload", "bad.csv", "--profile", "profile.toml"], ["bad.csv, line 3: unknown outcome 'flaky'"]),
        (["--workload", "night.csv", "--profile", "typo.toml"], ["unknown key 'per_recrod_ms'", "did you mean 'per_record_ms'"]),
        (["--workload", "night.csv", "--profile", "short.toml"], ["missing key 'time_limit_s'"]),
        (["--workload", "nope.csv", "--profile", "profile.toml"], ["cannot read the workload nope.csv"]),
        (["--profile", "profile.toml"], ["give exactly one of --workload CSV or --history HANDLER"]),
    ]
    for args, fragments in cases:
        assert_one_line_error(run_cli("plan", "invocation", "--model", "async", *args, cwd=inputs), *fragments)
