"""The store owns its SQL: no module outside ``vardiya.store`` names a state table in SQL text.

import-linter's contract "the store owns its SQL" (pyproject.toml) forbids importing
``vardiya.store.schema`` outside the store; this test catches what an import graph cannot see: a state
table named in a SQL string (``sa.text``, ``exec_driver_sql``, a raw cursor). It also checks that the
contract lists every module and package of vardiya but the store, so a new package cannot slip by.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

from vardiya.store.schema import metadata

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "src" / "vardiya"
STORE = SOURCE / "store"
TABLES = sorted(metadata.tables)
# A table name where SQL puts one: after FROM, JOIN, INTO, UPDATE, TABLE, or in ON CONFLICT's target.
_SQL_TABLE = re.compile(
    r"\b(?:from|join|into|update|table|exists)\s+(?:\w+\.)?[\"`]?(" + "|".join(map(re.escape, TABLES)) + r")\b",
    re.IGNORECASE,
)


def sql_table_mentions(text: str, filename: str = "<text>") -> Iterator[tuple[int, str, str]]:
    """``(line, table, literal)`` for each string literal of the module ``text`` naming a state table in SQL."""
    literals = sorted(
        (node.lineno, node.value)
        for node in ast.walk(ast.parse(text, filename))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    )
    for line, literal in literals:
        for match in _SQL_TABLE.finditer(literal):
            yield line, match.group(1), literal.strip().splitlines()[0][:80]


def _modules_outside_store() -> list[Path]:
    return [path for path in sorted(SOURCE.rglob("*.py")) if STORE not in path.parents]


def test_no_module_outside_the_store_names_a_state_table_in_sql() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {table} in {literal!r}"
        for path in _modules_outside_store()
        for line, table, literal in sql_table_mentions(path.read_text(encoding="utf-8"), str(path))
    ]
    assert not found, "state tables named in SQL outside src/vardiya/store/ (add a store method):\n" + "\n".join(found)


def test_the_check_finds_a_table_in_sql_text() -> None:
    module = 'import sqlalchemy as sa\n\nquery = sa.text(\n    "SELECT id FROM work_items WHERE state = :state"\n)\n'
    other = "cursor.execute('update ledger_claims set until = ?')\nrows = 'INSERT INTO  pipeline_tasks (task) VALUES (?)'\n"
    assert list(sql_table_mentions(module)) == [(4, "work_items", "SELECT id FROM work_items WHERE state = :state")]
    assert [(line, table) for line, table, _ in sql_table_mentions(other)] == [(1, "ledger_claims"), (2, "pipeline_tasks")]
    # Words that only look like table names are not SQL: a ledger in prose, a column named like a table.
    assert list(sql_table_mentions("note = 'the ledger of the period'\nname = 'work_items_due'\n")) == []


def test_the_import_contract_covers_every_module_but_the_store() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    (contract,) = [entry for entry in config["contracts"] if entry["name"] == "the store owns its SQL"]
    assert contract["forbidden_modules"] == ["vardiya.store.schema"]
    top_level = {
        f"vardiya.{path.stem if path.is_file() else path.name}"
        for path in SOURCE.iterdir()
        if (path.suffix == ".py" and path.name != "__init__.py") or (path / "__init__.py").is_file()
    }
    assert set(contract["source_modules"]) == top_level - {"vardiya.store"}
