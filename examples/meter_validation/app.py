"""The meter-validation example as an app for ``--app examples/meter_validation/app.py:app``.

The night's outcomes are ``validation-night.csv`` next to this file; the handlers' code is
``vardiya.examples.meter_validation``.
"""

from pathlib import Path

from vardiya.examples.meter_validation import build_app

HERE = Path(__file__).resolve().parent

app = build_app(HERE / "validation-night.csv")
