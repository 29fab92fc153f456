"""Every figure README and docs/ quote is found in the results file of benchmarks/results/ the
line names (issue 30 #7): a line that quotes a measured figure names its file, and each decimal
figure on it stands in that file as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = re.compile(r"benchmarks/results/([\w.-]+\.txt)")
DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.]*\d)")


def _quoting_lines() -> list[tuple[str, int, str]]:
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
            if RESULTS.search(line):
                found.append((str(page.relative_to(ROOT)), number, line))
    return found


@pytest.mark.parametrize(("page", "number", "line"), _quoting_lines(),
                         ids=lambda value: str(value)[:30])  # fmt: skip
def test_each_figure_a_line_quotes_is_in_the_results_file_it_names(
    page: str, number: int, line: str
) -> None:
    names = RESULTS.findall(line)
    texts = []
    for name in names:
        path = ROOT / "benchmarks/results" / name
        assert path.is_file(), f"{page}:{number} names {name}, which is not in benchmarks/results"
        texts.append(path.read_text(encoding="utf-8"))
    for figure in DECIMAL.findall(RESULTS.sub("", _measured(line))):
        assert any(figure in text for text in texts), (
            f"{page}:{number}: {figure} is not in {', '.join(names)}"
        )


def _measured(line: str) -> str:
    """What a line says was measured: a table row's figure and value cells (its goal is a
    promise, not a measurement); all of any other line."""
    if not line.startswith("|"):
        return line
    return " ".join(line.strip("|").split("|")[:2])


def test_every_figure_on_the_figures_pages_names_its_results_file() -> None:
    """On docs/figures.md and README's Figures section, a line with a measured (decimal)
    figure names the results file it comes from."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    sections = {
        "README.md": readme.split("## Figures", 1)[1].split("\n## ", 1)[0],
        "docs/figures.md": (ROOT / "docs/figures.md").read_text(encoding="utf-8"),
    }
    for page, text in sections.items():
        for line in text.splitlines():
            if DECIMAL.search(RESULTS.sub("", line)):
                assert RESULTS.search(line), f"{page}: a figure without its results file: {line}"


def test_there_are_figures_to_check() -> None:
    assert len(_quoting_lines()) >= 10
