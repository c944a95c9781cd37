"""``vardiya ui``: the web dashboard an on-call engineer opens first, on the same store and the same
report functions as the CLI (``reports.py``), so a page, ``/api/...`` and ``--json`` agree.

Needs the ``ui`` extra (``pip install 'vardiya[ui]'``): FastAPI, uvicorn, Jinja2, python-multipart.
Security (token, CSRF, Host header) is in ``security.py``.
"""

from __future__ import annotations

from .security import Guard
from .server import create_app

__all__ = ["Guard", "create_app"]
