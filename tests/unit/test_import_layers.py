"""The layers of ARCHITECTURE.md are a contract: ``lint-imports`` runs here, so the test command fails
when an import runs the wrong way (a pure rule reaching the store, the engine importing a service)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _contracts() -> list[dict[str, object]]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]


def test_every_import_contract_is_kept() -> None:
    done = subprocess.run(
        [str(LINT_IMPORTS), "--config", str(ROOT / "pyproject.toml")], cwd=ROOT, capture_output=True, text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for contract in _contracts():
        assert f"{contract['name']} KEPT" in done.stdout


def test_the_layers_contract_names_every_layer_of_the_architecture() -> None:
    (layers,) = [contract for contract in _contracts() if contract["type"] == "layers"]
    # exhaustive: a new top-level module cannot slip past the layers unplaced
    assert layers["exhaustive"] is True and layers["containers"] == ["vardiya"]
    order = [str(layer) for layer in layers["layers"]]  # type: ignore[union-attr]
    position = {name.strip(): index for index, layer in enumerate(order) for name in layer.replace("|", ":").split(":")}
    assert position["cli"] < position["service"] < position["app"] < position["invoke"] < position["connectors"]
    assert position["connectors"] < position["store"] < position["errors"]
    # only the two pure modules of the slots package are let through, by name
    assert sorted(layers["ignore_imports"]) == [  # type: ignore[arg-type]
        "vardiya.connectors.* -> vardiya.slots.hashing",
        "vardiya.connectors.* -> vardiya.slots.scheme",
    ]


def test_a_wrong_way_import_breaks_the_contracts(tmp_path: Path) -> None:
    """The contracts can fail: a copy of the package whose retry rule imports the worker's service
    breaks the pure, the layers and the acyclic contracts."""
    import shutil

    source = ROOT / "src" / "vardiya"
    copy = tmp_path / "src" / "vardiya"
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__"))
    with (copy / "invoke" / "retry.py").open("a", encoding="utf-8") as module:
        module.write("\nfrom ..service import worker as _worker  # noqa: E402,F401\n")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    done = subprocess.run(
        [str(LINT_IMPORTS), "--config", str(tmp_path / "pyproject.toml"), "--no-cache"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
        env={"PYTHONPATH": str(tmp_path / "src"), "PATH": str(LINT_IMPORTS.parent)},
    )
    assert done.returncode != 0
    assert "pure logic imports neither the store nor the services BROKEN" in done.stdout
    assert "layers: pure -> store -> connectors -> engine -> app -> services -> faces BROKEN" in done.stdout
    assert "no cycles between subpackages BROKEN" in done.stdout
