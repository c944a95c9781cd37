"""The per-slot bar chart: valid SVG, one bar per slot in each panel, heights proportional to values."""

from __future__ import annotations

import itertools
import sys
import types
import xml.etree.ElementTree as ET
from datetime import timedelta
from pathlib import Path

import pytest

from vardiya.errors import InvalidInput
from vardiya.slots.chart import HIGHLIGHT_COLOUR, bar_chart_svg, check_chart_path, report_chart_svg, write_chart
from vardiya.slots.report import build_ledger_report

SVG = "{http://www.w3.org/2000/svg}"


def _panels(svg: str) -> dict[str, list[ET.Element]]:
    root = ET.fromstring(svg.encode("utf-8"))
    assert root.tag == f"{SVG}svg"
    panels = {}
    for group in root.iter(f"{SVG}g"):
        if group.get("class") == "panel":
            bars = [rect for rect in group.iter(f"{SVG}rect") if "bar" in (rect.get("class") or "").split()]
            panels[group.get("data-series")] = bars
    return panels


def _heights(bars: list[ET.Element]) -> list[float]:
    return [float(bar.get("height", "nan")) for bar in bars]


def test_two_panels_with_one_bar_per_slot_and_proportional_heights() -> None:
    counts = [10, 20, 5, 0, 40, 35]
    p95 = [1.5, 3.0, 0.75, 0.0, 12.0, 6.0]
    svg = bar_chart_svg("load", [str(s) for s in range(6)], {"records": counts, "p95 ms": p95})
    panels = _panels(svg)
    assert list(panels) == ["records", "p95 ms"]
    for name, values in (("records", counts), ("p95 ms", p95)):
        bars = panels[name]
        assert len(bars) == 6
        assert [int(bar.get("data-slot", "-1")) for bar in bars] == list(range(6))
        assert [float(bar.get("data-value", "nan")) for bar in bars] == [float(v) for v in values]
        heights = _heights(bars)
        scale = heights[4] / values[4]  # the tallest bar
        assert scale > 0
        for height, value in zip(heights, values, strict=True):
            assert height == pytest.approx(value * scale, abs=0.01)
        # Bars stand on one baseline: top plus height is the same for every bar.
        bottoms = {round(float(bar.get("y", "nan")) + float(bar.get("height", "nan")), 2) for bar in bars}
        assert len(bottoms) == 1


def test_axis_ticks_are_round_and_reach_the_largest_value() -> None:
    svg = bar_chart_svg("t", ["0", "1", "2"], {"records": [1197, 1198, 1203]})
    root = ET.fromstring(svg)
    ticks = [float(text.text.replace(",", "")) for text in root.iter(f"{SVG}text") if text.get("class") == "tick"]
    assert ticks[0] == 0 and ticks == sorted(ticks) and ticks[-1] >= 1203
    steps = {round(b - a, 6) for a, b in itertools.pairwise(ticks)}
    assert len(steps) == 1 and steps.pop() in (200.0, 250.0, 500.0)


def test_highlighted_bars_are_marked_and_explained() -> None:
    svg = bar_chart_svg("t", ["0", "1", "2", "3"], {"a": [1, 2, 3, 4], "b": [4, 3, 2, 1]}, highlight={1, 3},
                        highlight_label="overrun")
    for bars in _panels(svg).values():
        marked = [int(bar.get("data-slot", "-1")) for bar in bars if "overrun" in (bar.get("class") or "")]
        assert marked == [1, 3]
        assert {bar.get("fill") for bar in bars if "overrun" in (bar.get("class") or "")} == {HIGHLIGHT_COLOUR}
        assert HIGHLIGHT_COLOUR not in {bar.get("fill") for bar in bars if bar.get("class") == "bar"}
    assert "overrun" in [text.text for text in ET.fromstring(svg).iter(f"{SVG}text")]
    plain = bar_chart_svg("t", ["0", "1"], {"a": [1, 2]})
    assert "legend" not in plain


def test_text_is_escaped() -> None:
    title = 'jobs <"a"> & b'
    root = ET.fromstring(bar_chart_svg(title, ["<0>", "&1"], {"x & y": [1, 2]}))
    assert root.find(f"{SVG}title").text == title  # type: ignore[union-attr]
    texts = [text.text for text in root.iter(f"{SVG}text")]
    assert "<0>" in texts and "&1" in texts and "x & y" in texts


def test_all_zero_values_draw_flat_bars() -> None:
    bars = _panels(bar_chart_svg("t", ["0", "1", "2"], {"p95": [0, 0, 0]}))["p95"]
    assert _heights(bars) == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    ("labels", "series", "fragment"),
    [
        (["0", "1"], {"a": [1]}, "1 values for 2 labels"),
        (["0"], {"a": [-1]}, "negative"),
        (["0"], {"a": [float("nan")]}, "not finite"),
        ([], {"a": []}, "at least one bar"),
        (["0"], {}, "at least one series"),
    ],
)
def test_bad_series_are_refused(labels: list[str], series: dict[str, list[float]], fragment: str) -> None:
    with pytest.raises(InvalidInput, match=fragment):
        bar_chart_svg("t", labels, series)


def _report():  # type: ignore[no-untyped-def]
    samples = [(slot, 10.0 * (slot + 1), 1, 1, "done") for slot in range(24) for _ in range(slot % 3 + 1)]
    samples.append((7, 4_000_000.0, 1, 1, "done"))  # slot 7 overruns a 1 h interval
    return build_ledger_report(samples, slots=24, tick_interval=timedelta(hours=1), period="2026-12-01", job="j")


def test_the_report_chart_shows_counts_and_p95_with_overruns() -> None:
    report = _report()
    panels = _panels(report_chart_svg(report))
    records, p95 = panels["records"], panels["p95 duration (ms)"]
    assert [float(bar.get("data-value", "nan")) for bar in records] == [load.count for load in report.slots]
    assert [float(bar.get("data-value", "nan")) for bar in p95] == [load.p95_ms for load in report.slots]
    assert [bar.get("data-slot") for bar in p95 if "overrun" in (bar.get("class") or "")] == ["7"]


def test_write_chart_writes_svg_atomically(tmp_path: Path) -> None:
    target = tmp_path / "charts" / "load.svg"
    assert write_chart(target, _report()) == target
    assert len(_panels(target.read_text(encoding="utf-8"))["records"]) == 24
    assert sorted(p.name for p in target.parent.iterdir()) == ["load.svg"]  # no temp file left behind


def test_png_without_cairosvg_says_to_use_svg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cairosvg", None)  # import cairosvg now raises ImportError
    target = tmp_path / "load.png"
    with pytest.raises(InvalidInput, match=r"cairosvg.*\.svg"):
        write_chart(target, _report())
    assert not target.exists()


def test_png_with_cairosvg_converts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    converted: list[bytes] = []
    fake = types.ModuleType("cairosvg")

    def svg2png(*, bytestring: bytes) -> bytes:
        converted.append(bytestring)
        return b"\x89PNG fake"

    fake.svg2png = svg2png  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cairosvg", fake)
    target = tmp_path / "load.png"
    write_chart(target, _report())
    assert target.read_bytes() == b"\x89PNG fake"
    assert len(_panels(converted[0].decode("utf-8"))["records"]) == 24


def test_other_suffixes_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"\.svg or \.png"):
        check_chart_path(tmp_path / "load.pdf")
    assert check_chart_path("LOAD.SVG") == "svg"
