"""What a learner sees before acting, read from the stored notebooks (no kernel):

* **predict, then see**: every "Predict" prompt is followed by the run that
  settles it and then by its answer folded in a ``<details>`` block whose
  summary is "Show the answer"; nothing visible between the prompt and that
  block reads the result out ("**Read.**"), no visible text anywhere gives a
  lettered prediction's letter ("**Read.** (b)"), and the objectives ("What you
  will learn") share no run of six words with an answer (as "the poll wait is
  uniform on [0, P)" once did);
* **labelled solutions**: every solution cell is collapsed, and its first line —
  all JupyterLab shows of a collapsed cell — is "# Solution (open after
  trying)", as is the site's toggle;
* **readable tables**: in every stored HTML table, no style lets a header break
  inside a word (``overflow-wrap: anywhere`` or ``break-word``, ``word-break:
  break-all``, ``hyphens: auto``), and where a header's width is limited (a
  ``max-width`` on ``th``), a long snake_case or dotted word in it carries a
  ``<wbr>`` at each of its underscores and dots, so that it wraps there; no
  header shows an unformatted float (``0.050000``); a missing value ("–") is
  never shaded as if it were one.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
LESSONS = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb") if p.stem != "00_index")
PROMPT = "**Predict.**"
SUMMARY = "<summary>Show the answer</summary>"
DETAILS = re.compile(r"<details>\s*(<summary>.*?</summary>)(.*?)</details>", re.S)
SOLUTION = "Solution (open after trying)"
# a header word this long must be able to wrap at its underscores and dots
LONG_WORD = 12
# CSS that lets a browser break a word anywhere when its column is narrow
BREAKS_WORDS = re.compile(
    r"(overflow-wrap|word-wrap)\s*:\s*(anywhere|break-word)|word-break\s*:\s*(break-all|break-word)|hyphens\s*:\s*auto"
)
UNFORMATTED_FLOAT = re.compile(r"-?[\d,]*\.\d*0")  # pandas' default for a float index: 0.050000


def cells(stem: str) -> list:
    return nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4).cells


def visible(text: str) -> str:
    """A markdown cell's text as a reader sees it before opening anything."""
    return DETAILS.sub("", text)


def answers(text: str) -> list[str]:
    return [body for summary, body in DETAILS.findall(text) if summary == SUMMARY]


def spans(nb: list) -> list[tuple[int, int]]:
    """Each prompt's cell and the cell where its answer must be given by: the next
    prompt, or the exercises."""
    prompts = [i for i, c in enumerate(nb) if c.cell_type == "markdown" and PROMPT in visible(c.source)]
    ends = [
        next(
            (j for j in range(i + 1, len(nb)) if PROMPT in nb[j].source or "## Exercises" in nb[j].source),
            len(nb),
        )
        for i in prompts
    ]
    return list(zip(prompts, ends))


@pytest.mark.parametrize("stem", LESSONS)
def test_every_prediction_is_answered_only_in_a_folded_block_after_its_run(stem):
    nb = cells(stem)
    assert spans(nb), "a lesson asks before it shows"
    for start, end in spans(nb):
        prompt = nb[start].source
        after_prompt = prompt[prompt.index(PROMPT) :]
        assert not answers(after_prompt), f"answered in the prompt's own cell: {prompt[:120]!r}"
        found = [j for j in range(start + 1, end + 1) if j < len(nb) and answers(nb[j].source)]
        assert found, f"{stem}: no folded answer after {after_prompt[:100]!r}"
        first = found[0]
        assert any(nb[j].cell_type == "code" for j in range(start + 1, first)), "the run comes before the answer"
        between = [visible(nb[j].source) for j in range(start + 1, first) if nb[j].cell_type == "markdown"]
        before = nb[first].source.split("<details>")[0]
        for text in [*between, before]:
            assert "**Read.**" not in text, f"{stem}: read out before the answer is opened: {text[:120]!r}"


@pytest.mark.parametrize("stem", LESSONS)
def test_no_visible_text_gives_a_predictions_letter(stem):
    for c in cells(stem):
        if c.cell_type == "markdown":
            text = visible(c.source)
            assert not re.search(r"\*\*Read\.\*\*\s*(Usually\s+)?\([a-d]\)", text), text[:200]
            assert "<details>" not in text, f"an unclosed or malformed answer block: {c.source[:200]!r}"


def runs_of(text: str, n: int = 6) -> set[tuple[str, ...]]:
    words = re.findall(r"[a-z0-9/]+", text.lower())
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


@pytest.mark.parametrize("stem", LESSONS)
def test_the_objectives_give_away_no_answer(stem):
    nb = cells(stem)
    objectives = nb[0].source.split("**What you will learn**")[1].split("**What you need first")[0]
    given = [" ".join(r) for c in nb for a in answers(c.source) for r in runs_of(a) & runs_of(objectives)]
    assert not given, f"{stem}: the objectives say what an answer says: {given[0]!r}"


@pytest.mark.parametrize("stem", LESSONS)
def test_every_solution_is_collapsed_under_its_label(stem):
    solutions = [c for c in cells(stem) if "solution" in c.metadata.get("tags", [])]
    assert solutions
    for c in solutions:
        assert c.source.splitlines()[0] == f"# {SOLUTION}", c.source[:80]
        assert c.metadata["jupyter"] == {"source_hidden": True, "outputs_hidden": True}
        assert c.metadata["mystnb"]["code_prompt_show"] == SOLUTION
        assert "hide-cell" in c.metadata["tags"]


def stored_tables(stem: str) -> list[str]:
    return [
        o["data"]["text/html"]
        for c in cells(stem)
        for o in c.get("outputs", [])
        if "<table" in o.get("data", {}).get("text/html", "")
    ]


def th_texts(html: str) -> list[str]:
    """Each header cell's content, its <wbr> kept and other tags dropped."""
    return [re.sub(r"<(?!wbr>)[^>]*>", "", t).strip() for t in re.findall(r"<th\b[^>]*>(.*?)</th>", html, re.S)]


def unbreakable(word: str) -> bool:
    """A long snake_case or dotted word without a <wbr> at one of its joins."""
    if len(word.replace("<wbr>", "")) <= LONG_WORD:
        return False
    return bool(re.search(r"_(?!<wbr>)(?=\w\w)(?!(?:ms|kb)$)|\.(?!<wbr>)(?=[^\W\d]\w)", word))


@pytest.mark.parametrize("stem", LESSONS)
def test_no_table_header_can_break_inside_a_word(stem):
    for html in stored_tables(stem):
        style = "".join(re.findall(r"<style[^>]*>(.*?)</style>", html, re.S))
        assert not BREAKS_WORDS.search(style), f"{stem}: {BREAKS_WORDS.search(style).group(0)!r} in a table's style"
        narrow = re.search(r"\bth\s*\{[^}]*max-width", style)  # a plain DataFrame's headers never wrap
        for text in th_texts(html):
            long = [w for w in text.split() if narrow and unbreakable(w)]
            assert not long, f"{stem}: the header {text!r} can only wrap inside {long[0]!r}"
            plain = text.replace("<wbr>", "")
            assert not UNFORMATTED_FLOAT.fullmatch(plain), f"{stem}: a header shows a raw float {plain!r}"


@pytest.mark.parametrize("stem", LESSONS)
def test_a_missing_value_is_never_shaded(stem):
    for html in stored_tables(stem):
        shaded = set()
        for selectors, body in re.findall(r"([^{}]+)\{([^}]*)\}", html.split("</style>")[0]):
            if "background-color" in body:
                shaded |= set(re.findall(r"#(T_\w+)", selectors))
        for cell_id, text in re.findall(r'<td id="(T_\w+)"[^>]*>(.*?)</td>', html, re.S):
            assert not (text.strip() in ("–", "nan", "NaN") and cell_id in shaded), f"{stem}: {cell_id} is shaded"
