#!/usr/bin/env bash
# Run every benchmark in benchmarks/ (bench_*.py) one after another, with the same arguments.
#   benchmarks/run_all.sh [--backend sqlite|postgresql|both] [--pg-url URL] [--runs R]
# (--rows is per-benchmark; pass it only to a single script.)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${PYTHON:-$here/../.venv/bin/python}"
status=0
for script in "$here"/bench_*.py; do
    echo "== $(basename "$script")"
    "$python" "$script" "$@" || status=$?
    echo
done
exit "$status"
