"""``python -m vardiya`` is the ``vardiya`` command."""

from vardiya.cli import main

main()
