"""The nightly-users example as an app for ``--app examples/nightly_users/app.py:app``.

The users table is created next to this file on first use; outputs go to ./out/yyyy/MM/dd/{id}.json
under the directory you run vardiya from. The job's code is ``vardiya.examples.nightly_users``.
"""

from pathlib import Path

from vardiya.examples.nightly_users import build_app

HERE = Path(__file__).resolve().parent

app = build_app(HERE / "users.db", Path.cwd() / "out")
