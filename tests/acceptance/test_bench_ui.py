"""``benchmarks/bench_ui.py`` runs end to end on a small store: it fills it, every endpoint answers 200,
and each prints its p50/p95 and the target line (the real sizes run by hand; figures in benchmarks/README.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_ui_benchmark_measures_every_endpoint_on_a_small_store() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_ui.py"), "--backend", "sqlite", "--ledger", "2000",
         "--items", "300", "--partitions", "20", "--requests", "2"],
        check=False, capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "[sqlite] filled: 2,000 ledger rows" in result.stdout and "200 pipeline tasks" in result.stdout
    measured = [line for line in lines if " p95 " in line and "target:" not in line]  # the verdict line lists the misses
    assert len(measured) >= 25 and all(line.endswith(("met", "NOT met")) for line in measured)
    assert any("/slots/bench/ticks/" in line for line in measured) and any("/api/pipelines/big/status" in line for line in measured)
    assert lines[-1].startswith("[sqlite] target: p95 <= 300 ms on every endpoint: ")
