"""The docs are a manual: each page short enough to read (at most 300 lines), and none tells how
the project was made or who made it (history goes to CHANGELOG.md, figures to
benchmarks/results/)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([*ROOT.glob("docs/*.md"), ROOT / "README.md", ROOT / "experiments" / "README.md"])
MOST_LINES = 300
CONTRIBUTORS = {"architecture.md", "adding-an-experiment.md"}  # how perflab is built
# How a notebook, not a manual, speaks: of the issue it answered and who decided
NOTEBOOK = re.compile(r"issue was silent|what i decided|\bI (decided|chose|measured|found)\b", re.I)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_page_is_short_enough_to_read(page):
    assert len(page.read_text().splitlines()) <= MOST_LINES


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_page_says_what_the_tool_does_not_who_made_it(page):
    said = [line for line in page.read_text().splitlines() if NOTEBOOK.search(line)]
    assert not said


def test_every_verb_has_a_reference_page():
    """Each verb is shown by a page a user reads, not only by the contributors' pages."""
    from perflab.cli import VERBS

    readable = [p.read_text() for p in PAGES if p.name not in CONTRIBUTORS]
    missing = [verb for verb in VERBS if not any(f"perflab {verb}" in page for page in readable)]
    assert not missing
