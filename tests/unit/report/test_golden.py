"""The report of a fixed campaign, as golden files (BenchExec's way with its tables): the
shipped contaminated A/A + cut campaign, rendered as Markdown, CSV and HTML (figures
left out of the HTML's golden copy: they are SVG from matplotlib, checked elsewhere).
A change to what a report says shows up here as a diff to read; KIT_GOLDEN=write
rewrites the files after such a change was meant."""

import os
import re
from pathlib import Path

import pytest

from kit.report import writers
from kit.results import analysis

from ..results.test_coverage import shipped

GOLDEN = Path(__file__).parent / "golden"


def rendered(fmt: str) -> str:
    recs = [r for r in shipped() if r["campaign"] == "3cef6962"]
    text = writers.render(analysis.summarise(recs, "aa-and-cut-under-load", 0.95), fmt)
    return re.sub(r"<svg.*?</svg>", "<svg/>", text, flags=re.S) if fmt == "html" else text


def matches_golden(name: str, text: str) -> bool:
    """Whether text is golden/NAME's (KIT_GOLDEN=write: it becomes so)."""
    path = GOLDEN / name
    if os.environ.get("KIT_GOLDEN") == "write":
        path.write_text(text)
    return text == path.read_text()


@pytest.mark.parametrize("fmt", ["md", "csv", "html"])
def test_report_matches_its_golden_file(fmt):
    assert matches_golden(f"aa-and-cut.{fmt}", rendered(fmt))
