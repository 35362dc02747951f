"""Open a report in Debian's headless Chromium (driven by Playwright, no browser download)
and say what a reader's browser saw: console errors, network requests, and how many
marks each chart drew. Also writes the README's screenshots:

    python -m tests.report_browser out/report.html docs/
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
WIDTH = 1400
# Nothing may phone home or update itself while the page is open: a test must see the
# page's own requests alone.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Per chart: its label and the marks that carry data (bars, points, lines).
CHART_MARKS = """() => [...document.querySelectorAll('svg')].map(svg => ({
    label: svg.getAttribute('aria-label'),
    marks: [...svg.querySelectorAll('rect, circle, polyline')]
        .filter(m => m.getBBox().width > 0 || m.getBBox().height > 0).length,
}))"""


# Tables whose columns run past their box (hidden until scrolled sideways): their section.
CUT_TABLES = """() => [...document.querySelectorAll('.scroll')]
    .filter(box => box.scrollWidth > box.clientWidth)
    .map(box => box.closest('section').id)"""
# Each section's text as drawn, by its id.
SECTIONS = """() => Object.fromEntries(
    [...document.querySelectorAll('section')].map(section => [section.id, section.innerText]))"""
# The answer cards as drawn: title, the value in large type, the lines under it.
CARDS = """() => [...document.querySelectorAll('a.answer')].map(card => ({
    title: card.querySelector('span').innerText,
    value: card.querySelector('b').innerText,
    lines: [...card.querySelectorAll('li')].map(line => line.innerText),
}))"""
# Every table as drawn, by its section: its headings and the text of each cell.
TABLES = """() => [...document.querySelectorAll('section table')].map(table => ({
    section: table.closest('section').id,
    head: [...table.querySelectorAll('thead th')].map(cell => cell.innerText),
    rows: [...table.querySelectorAll('tbody tr')]
        .map(row => [...row.querySelectorAll('td')].map(cell => cell.innerText)),
}))"""
# Headings with nothing drawn under them: a section's with nothing after it, a
# subsection's with nothing before the next heading.
BARE_HEADINGS = """() => [...document.querySelectorAll('h2, h3')].filter(heading => {
    const next = heading.nextElementSibling;
    if (!next || next.getBoundingClientRect().height === 0) return true;
    return heading.tagName === 'H3' && /^H[23]$/.test(next.tagName);
}).map(heading => heading.innerText)"""


@dataclass
class Visit:
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    charts: list[dict] = field(default_factory=list)
    width: int = 0  # of the page's content: wider than the window means a side scroll
    cut_tables: list[str] = field(default_factory=list)  # sections of tables wider than it
    sections: dict[str, str] = field(default_factory=dict)  # id: text
    cards: list[dict] = field(default_factory=list)  # title, value, lines
    tables: list[dict] = field(default_factory=list)  # section, head, rows
    bare_headings: list[str] = field(default_factory=list)

    def card(self, title: str) -> dict:
        """The one card whose title starts with ``title``."""
        (card,) = [c for c in self.cards if c["title"].startswith(title)]
        return card

    def table(self, section: str, heading: str) -> list[dict[str, str]]:
        """The rows of the one table of ``section`` with a column ``heading``, each as
        its cells by heading."""
        (table,) = [t for t in self.tables if t["section"] == section and heading in t["head"]]
        return [dict(zip(table["head"], row, strict=True)) for row in table["rows"]]


def visit(page_path: Path, screenshots: Path | None = None) -> Visit:
    """Load the page at 1400 px wide; with ``screenshots``, save the top of the page and
    the latency and permit sections there."""
    from playwright.sync_api import sync_playwright

    seen = Visit()
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            profile,  # a fresh --user-data-dir
            executable_path=str(CHROMIUM),
            args=FLAGS,
            viewport={"width": WIDTH, "height": 1000},
            # The browser is not pwcap's: under `make sanitize` it runs without the ASan
            # runtime preloaded into Python (as Spark's JVM does), which it spins under.
            env={name: value for name, value in os.environ.items() if name != "LD_PRELOAD"},
        )
        try:
            page = browser.new_page()
            page.on(
                "console",
                lambda m: seen.console_errors.append(m.text) if m.type == "error" else None,
            )
            page.on("pageerror", lambda error: seen.console_errors.append(str(error)))
            browser.on("request", lambda request: seen.requests.append(request.url))
            page.goto(page_path.resolve().as_uri(), wait_until="load")
            seen.charts = page.evaluate(CHART_MARKS)
            seen.width = page.evaluate("document.documentElement.scrollWidth")
            seen.cut_tables = page.evaluate(CUT_TABLES)
            seen.sections = page.evaluate(SECTIONS)
            seen.cards = page.evaluate(CARDS)
            seen.tables = page.evaluate(TABLES)
            seen.bare_headings = page.evaluate(BARE_HEADINGS)
            if screenshots is not None:
                screenshots.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(screenshots / "report.png"))
                page.add_style_tag(content="nav { position: static; }")  # not over a section
                for section in ("latency", "permits"):
                    page.locator(f"#{section}").screenshot(
                        path=str(screenshots / f"report-{section}.png")
                    )
        finally:
            browser.close()
    return seen


if __name__ == "__main__":
    result = visit(Path(sys.argv[1]), Path(sys.argv[2]))
    print(f"{len(result.charts)} charts, console errors: {result.console_errors or 'none'}")
