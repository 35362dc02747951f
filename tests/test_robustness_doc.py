"""``docs/robustness.md`` says what pwcap answers to each bad input of the catalogue
(``fuzz/catalogue.py``): every answer is the one the catalogue expects, and the page is
what pwcap answers today (regenerate it with ``python -m fuzz.catalogue``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fuzz.catalogue import Answer, Entry, answers, markdown

DOC = Path(__file__).resolve().parent.parent / "docs" / "robustness.md"


@pytest.fixture(scope="module")
def found() -> list[tuple[Entry, Answer]]:
    return answers()


def test_every_bad_input_gets_the_answer_the_catalogue_expects(
    found: list[tuple[Entry, Answer]],
) -> None:
    unmet = [
        (entry.what, entry.expect, answer)
        for entry, answer in found
        if not answer.meets(entry.expect)
    ]
    assert unmet == []


def test_the_robustness_page_is_what_pwcap_answers(found: list[tuple[Entry, Answer]]) -> None:
    assert DOC.read_text() == markdown(found), "run: python -m fuzz.catalogue > docs/robustness.md"
