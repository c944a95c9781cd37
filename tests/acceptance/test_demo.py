"""``vardiya demo`` runs end to end on a fresh SQLite store, as the README promises."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import run_cli
from vardiya.examples.meter_validation import NIGHT_CSV, Outcome, load_outcomes, load_records

#: The stream handlers' batch size in the example (``STREAM_SETTINGS``).
BATCH = 100
#: A guard against a hung demo, not a speed check: about 30 s alone, several times that beside a busy suite.
DEMO_TIMEOUT = 600


def test_demo_runs_and_reports_its_figures(tmp_path: Path) -> None:
    result = run_cli("demo", "--json", cwd=tmp_path, timeout=DEMO_TIMEOUT)
    assert result.code == 0, result.stderr
    document = json.loads(result.stdout)
    assert Path(document["directory"]) == tmp_path / "vardiya-demo"
    primitives = document["sections"]["primitives"]
    assert primitives["enqueued"] == 200
    assert primitives["re_enqueued"] == 0
    assert primitives["succeeded"] == 198
    assert primitives["dead"] == 2
    assert primitives["ledger_done"] == 198
    assert primitives["ledger_failed"] == 2
    assert primitives["duplicate_detected"] is True
    assert (tmp_path / "vardiya-demo" / "vardiya.db").exists()

    slots = document["sections"]["slots"]
    assert slots["done"] == 28_742 and slots["still_failed"] == 0 and slots["files"] == 28_742
    assert slots["recovered_slots"][0] == 3 and slots["recovered"] == 1_198
    assert slots["balance"]["max"] - slots["balance"]["min"] <= 1

    pipelines = document["sections"]["pipelines"]
    assert (pipelines["tasks"], pipelines["edges"], pipelines["blast_radius"]) == (48, 47, 4)
    assert pipelines["failed"] == ["clean@2026-06"] and len(pipelines["blocked"]) == 4
    assert sorted(pipelines["resumed"]) == sorted(pipelines["failed"] + pipelines["blocked"])
    assert pipelines["green"] is True and pipelines["undeclared_failures"] > 0

    check_invocation_figures(document["sections"]["invocation"])
    check_planner_figures(document["sections"]["planner"], tmp_path / "vardiya-demo")
    services = document["sections"]["services"]
    # 06:00-09:00 on time (once each, two schedulers), 15:00 after the outage, 16:00: six tick items;
    # 10:00-14:00 (the outage) passed by; 00:00-05:00 came before the job's first start, so they are not
    # missed ticks (the 06:00 tick's backlog takes their slots); the clock step refired nothing.
    assert (services["ticks"], services["fired"], services["skipped"], services["refired"]) == (6, 6, 5, 0)
    assert services["backlog"] == 500  # slots 10-14 of 100 meters each, recovered by the 15:00 tick
    assert services["done"] == 1_700 and services["tick_dead"] == 0  # slots 0-16 by 16:00


def check_invocation_figures(invocation: dict) -> None:
    """Every figure of the invocation section follows from the night's CSV and the models' rules."""
    outcomes = load_outcomes(NIGHT_CSV)
    night = [outcomes[record["id"]] for record in load_records(NIGHT_CSV, limit=invocation["readings"])]
    transient, poison = night.count(Outcome.TRANSIENT), night.count(Outcome.POISON)
    assert (invocation["transient"], invocation["poison"]) == (transient, poison)
    assert poison > 0 and transient > 0, "the demo's readings must hold both kinds of failure"
    batches = [night[start : start + BATCH] for start in range(0, len(night), BATCH)]
    dead_batches = [batch for batch in batches if Outcome.POISON in batch]
    in_dead_batches = sum(len(batch) for batch in dead_batches)
    failing_batches = [batch for batch in batches if set(batch) != {Outcome.OK}]
    models = invocation["models"]

    # sync: the caller retries each failure once; poison reaches the caller, nothing is dead-lettered
    sync = models["sync"]
    assert (sync["extra"], sync["caller_errors"], sync["dead_letter"]) == (transient + poison, poison, 0)
    assert invocation["caller_errors"] == poison
    # async and report_failures: only failing records come back; poison takes all 3 attempts
    for key in ("async", "report_failures"):
        assert (models[key]["extra"], models[key]["dead_letter"], models[key]["co_failed"]) == (
            transient + 2 * poison, poison, 0
        ), key
    # retry_batch: a failing batch comes back whole; a poison batch is dead-lettered whole
    retry_batch = models["retry_batch"]
    assert retry_batch["extra"] == sum(len(batch) for batch in failing_batches) + in_dead_batches
    assert (retry_batch["dead_letter"], retry_batch["co_failed"]) == (in_dead_batches, in_dead_batches - poison)
    assert retry_batch["calls"] == len(batches) + len(failing_batches) + len(dead_batches)
    # bisect isolates the poison: dead-letters it alone, at the price of re-calling halves
    assert (models["bisect"]["dead_letter"], models["bisect"]["co_failed"]) == (poison, 0)
    assert models["bisect"]["extra"] > models["async"]["extra"]
    # dedup: healthy records of a retried batch are skipped, yet a poison batch is still dead-lettered whole
    dedup = models["retry_batch_dedup"]
    assert (dedup["extra"], dedup["dead_letter"], dedup["co_failed"]) == (
        transient + 2 * poison, in_dead_batches, in_dead_batches - poison
    )
    for figures in models.values():
        assert figures["unique"] == invocation["readings"]

    # every dead letter is visible: logged by the worker and listed in the dead-letter store
    dead_items = poison + 4 * len(dead_batches)  # async per record; each stream handler per dead batch
    assert invocation["dead_letters"] == invocation["logged_dead_letters"] == dead_items
    redrive = invocation["redrive"]
    assert (redrive["items"], redrive["records"]) == (dead_items, 3 * poison + 2 * in_dead_batches)
    # only the dedup handler keeps keys: the healthy records of its dead batches are skipped, 72 h later
    assert redrive["already_succeeded"] == redrive["would_reprocess_without_retention"] == in_dead_batches - poison
    assert invocation["reprocessed_by_redrive"] == {
        "async": 3 * poison,
        "retry_batch": 3 * in_dead_batches,
        "bisect": 3 * poison,
        "report_failures": 3 * poison,
        "retry_batch_dedup": 3 * poison,
    }
    assert invocation["dead_after_redrive"] == dead_items


def check_planner_figures(planner: dict, directory: Path) -> None:
    """The planner section shows the spec's lessons on the whole night, and writes the sweep's chart."""
    assert planner["records"] == 20_000
    sync, async_, stream = (planner["models"][model] for model in ("sync", "async", "stream"))
    # the caller's wait falls while completion (mean and p99) grows: latency moves, it does not vanish
    assert sync["caller_wait_ms"] > async_["caller_wait_ms"] == stream["caller_wait_ms"]
    assert sync["completion_mean_ms"] < async_["completion_mean_ms"] < stream["completion_mean_ms"]
    assert sync["completion_p99_ms"] < async_["completion_p99_ms"] < stream["completion_p99_ms"]
    policies = planner["policies"]
    assert policies["retry_batch"]["co_failed"] > 0 == policies["bisect"]["co_failed"] == policies["report_failures"]["co_failed"]
    sweep = planner["sweep"]
    rows = {row["batch_size"]: row for row in sweep["rows"]}
    assert sorted(rows) == [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500]
    assert (sweep["cheapest"], sweep["fastest"]) == (10, 5)  # the cheapest is not the fastest
    assert rows[2500]["fits_limit"] is False and all(row["fits_limit"] for size, row in rows.items() if size != 2500)
    chart = Path(planner["chart"])
    assert chart == directory / "batch-sweep.svg" and "<svg" in chart.read_text(encoding="utf-8")


def test_demo_for_people_prints_tables_and_can_run_twice(tmp_path: Path) -> None:
    first = run_cli("demo", cwd=tmp_path, timeout=DEMO_TIMEOUT)
    assert first.code == 0, first.stderr
    assert "dead letters" in first.stdout
    words = " ".join(first.stdout.split())  # Rich wraps lines at the terminal's width
    assert "Invocation models" in words and "had already succeeded and were skipped" in words
    assert "The planner" in words and "the cheapest is not the fastest" in words and "batch-sweep.svg" in words
    second = run_cli("demo", cwd=tmp_path, timeout=DEMO_TIMEOUT)
    assert second.code == 0, second.stderr
    assert "enqueued 200 readings" in second.stdout
