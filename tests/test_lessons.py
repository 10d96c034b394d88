"""Every notebook is a lesson, read from the built notebooks as JupyterLab shows them:

* it opens with what you will learn, what you need first (a link to the lesson
  that teaches it) and how long Run All takes; the index quotes that time
  within 20% of the one measured by the build (``notebooks/run_all_seconds.json``);
* it asks before it shows (at least two "Predict" prompts, each followed by the
  run that settles it), has two or three exercises, each with a collapsed
  solution, and ends with its take-away: 3 to 5 bullets written from the run;
* what a learner reads is readable: no ``to_string()`` table, no code line over
  100 characters (the experiments' modules included), no printed line over 100,
  no visible test marker (nbval's are cell tags);
* every control carries a note that says, in the saved notebook, that it needs a
  running kernel;
* the glossary, in the index and in the README, explains every word the lessons
  put in its list.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

from fanoutsim import exercises as ex
from fanoutsim.lesson import NOTE_CLASS

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
LESSONS = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb") if p.stem != "00_index")
CHECK = re.compile(r"""ex\.check\("(\d+\.\d+)\"""")
GLOSSARY = (
    "watermark",
    "cursor",
    "lease",
    "hint",
    "fence",
    "incarnation",
    "sparse resolution",
    "checkpoint",
    "dead letter",
    "safety poll",
    "at-least-once",
    "partition",
    "poll interval",
    "retention",
)


def cells(stem: str) -> list:
    return nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4).cells


def number(stem: str) -> int:
    return int(stem.split("_")[0])


def tags(cell) -> list:
    return list(cell.get("metadata", {}).get("tags", []))


def hidden(cell, what: str = "source_hidden") -> bool:
    return bool(cell.get("metadata", {}).get("jupyter", {}).get(what))


@pytest.mark.parametrize("stem", LESSONS)
def test_a_lesson_opens_with_objectives_prerequisites_and_its_run_all_time(stem):
    first = cells(stem)[0]
    assert first.cell_type == "markdown"
    text = first.source
    assert text.startswith("# ") and "**What you will learn**" in text
    learn = text.split("**What you will learn**", 1)[1].split("**", 1)[0]
    assert len(re.findall(r"^- ", learn, flags=re.M)) >= 2, "list what the lesson teaches"
    need = re.search(r"\*\*What you need first:\*\*(.+?)(\n\n|$)", text, flags=re.S)
    assert need, "say what the learner needs first"
    if stem != "00_tour":
        assert re.search(r"\]\(\d\d_\w+\.ipynb", need.group(1)), "link the lesson that teaches what it needs"
    assert re.search(r"\*\*Run All:\*\* about [\d.,]+ (s|min)", text), "say how long Run All takes"
    assert not re.search(r"\bseeds? 00\d\b", text), "name the source systems, not the seed documents"


@pytest.mark.parametrize("stem", LESSONS)
def test_a_lesson_ends_with_its_takeaway_in_three_to_five_bullets(stem):
    nb = cells(stem)
    heading, last = nb[-2], nb[-1]
    assert heading.cell_type == "markdown" and heading.source.strip() == "## What to take away"
    assert sum("What to take away" in c.source for c in nb) == 1, "the take-away comes once, at the end"
    assert last.cell_type == "code" and "lesson.takeaway(" in last.source and hidden(last)
    (out,) = [o for o in last.outputs if o.output_type == "execute_result"]
    bullets = out.data["text/markdown"].splitlines()
    assert 3 <= len(bullets) <= 5 and all(b.startswith("- ") for b in bullets)
    assert sum(bool(re.search(r"\d", b)) for b in bullets) >= 2, "the take-away quotes the run's numbers"


@pytest.mark.parametrize("stem", LESSONS)
def test_a_lesson_asks_before_it_shows(stem):
    nb = cells(stem)
    prompts = [i for i, c in enumerate(nb) if c.cell_type == "markdown" and "**Predict.**" in c.source]
    assert len(prompts) >= 2, "ask at least twice before the run that answers"
    for i in prompts:
        assert nb[i + 1].cell_type == "code", f"the run that settles the prediction follows it: {nb[i].source!r}"


@pytest.mark.parametrize("stem", LESSONS)
def test_a_lesson_has_two_or_three_exercises_each_with_a_collapsed_solution(stem):
    nb = cells(stem)
    tasks = [
        CHECK.search(c.source).group(1)
        for c in nb
        if c.cell_type == "code" and "solution" not in tags(c) and CHECK.search(c.source)
    ]
    solutions = [CHECK.search(c.source).group(1) for c in nb if "solution" in tags(c)]
    assert 2 <= len(tasks) <= 3 and tasks == solutions
    assert all(t.startswith(f"{number(stem)}.") for t in tasks)
    assert tasks == [e.id for e in ex.exercises(number(stem))], "the checker knows exactly these exercises"
    for c in nb:
        if "solution" in tags(c):
            assert hidden(c) and hidden(c, "outputs_hidden")
            assert "right" in "".join(o.get("data", {}).get("text/plain", "") for o in c.outputs)


@pytest.mark.parametrize("stem", LESSONS + ["00_index"])
def test_what_a_learner_reads_is_readable(stem):
    for c in cells(stem):
        assert "NBVAL" not in c.source, "test markers are cell tags, not comments"
        if c.cell_type != "code":
            continue
        assert "to_string(" not in c.source, "show a table as a DataFrame"
        long = [line for line in c.source.splitlines() if len(line) > 100]
        assert not long, f"code lines over 100 characters: {long[0]!r}"
        for o in c.outputs:
            if o.output_type == "stream":
                wide = [line for line in o.text.splitlines() if len(line) > 100]
                assert not wide, f"printed lines over 100 characters: {wide[0]!r}"


def test_the_experiments_modules_read_within_100_characters():
    for path in sorted((NOTEBOOKS / "experiments").glob("*.py")):
        long = [n for n, line in enumerate(path.read_text().splitlines(), 1) if len(line) > 100]
        assert not long, f"{path.name}: lines {long} are over 100 characters"


def _widget_state(stem: str) -> dict:
    nb = nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4)
    return nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})


def _note_of(state: dict, model_id: str, seen=None) -> str | None:
    """The saved text of the note in a widget's tree, if it has one."""
    seen = set() if seen is None else seen
    if model_id in seen or model_id not in state:
        return None
    seen.add(model_id)
    s = state[model_id]["state"]
    if NOTE_CLASS in s.get("_dom_classes", ()):
        return s.get("value", "")
    for child in s.get("children", ()):
        found = _note_of(state, str(child).removeprefix("IPY_MODEL_"), seen)
        if found is not None:
            return found
    return None


@pytest.mark.parametrize("stem", LESSONS)
def test_every_saved_control_says_it_needs_a_running_kernel(stem):
    state = _widget_state(stem)
    for c in cells(stem):
        for o in getattr(c, "outputs", ()):
            view = o.get("data", {}).get("application/vnd.jupyter.widget-view+json")
            if view:
                note = _note_of(state, view["model_id"])
                assert note is not None, f"a control without a note: {c.source[:80]!r}"
                assert "needs a running kernel" in note and "Run this cell" in note


def _index_rows() -> dict[str, str]:
    index = (NOTEBOOKS / "src" / "00_index.py").read_text()
    return {
        m.group(1): m.group(2)
        for m in re.finditer(r"^# \| \[(\d\d_\w+)\]\(\1\.ipynb\) \| .+? \| (.+?) \|$", index, flags=re.M)
    }


def _seconds(text: str) -> float:
    m = re.search(r"([\d.]+) (s|min)", text)
    assert m, text
    return float(m.group(1)) * (60 if m.group(2) == "min" else 1)


def test_the_index_quotes_each_run_all_time_within_20_percent_of_the_measured_one():
    measured = json.loads((NOTEBOOKS / "run_all_seconds.json").read_text())
    rows = _index_rows()
    assert set(rows) == set(LESSONS)
    for stem, text in rows.items():
        said, took = _seconds(text), measured[stem]
        assert abs(said - took) <= 0.2 * took + 1.0, f"{stem}: the index says {text}, the build took {took} s"
        lesson_says = re.search(r"\*\*Run All:\*\* about ([\d.]+ (s|min))", cells(stem)[0].source).group(1)
        assert _seconds(lesson_says) == said, f"{stem} says {lesson_says}, the index {text}"


@pytest.mark.parametrize("where", ["index", "README"])
def test_the_glossary_explains_the_words_the_lessons_use(where):
    text = (NOTEBOOKS / "src" / "00_index.py").read_text() if where == "index" else (ROOT / "README.md").read_text()
    glossary = text[text.index("Glossary") :]
    for word in GLOSSARY:
        assert re.search(rf"\*\*{re.escape(word)}\w*\*\*", glossary, flags=re.I), f"{word!r} is not explained"
    for system in ("Cloacina", "Subspace", "RiffDB"):
        assert system in text


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _jupyterlab_ids(stem: str) -> set[str]:
    """The anchors JupyterLab gives a notebook's headings: the heading's text, spaces as '-'."""
    ids = set()
    for c in cells(stem):
        if c.cell_type == "markdown":
            for m in re.finditer(r"^#{1,6} +(.+?) *$", c.source, flags=re.M):
                text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1)).replace("`", "").replace("*", "")
                ids.add(text.replace(" ", "-"))
    return ids


@pytest.mark.parametrize("stem", LESSONS + ["00_index"])
def test_every_link_of_a_lesson_opens_a_file_beside_it_in_jupyterlab_and_on_the_site(stem):
    """A relative link must name a file beside the notebooks (the docs site copies the
    notebooks and the experiments' modules, and cannot serve a folder), and its #anchor a
    heading as JupyterLab anchors it (the site's anchors follow JupyterLab's)."""
    for c in cells(stem):
        if c.cell_type != "markdown":
            continue
        for target in LINK.findall(c.source):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            path, _, anchor = target.partition("#")
            where = NOTEBOOKS / path if path else NOTEBOOKS / f"{stem}.ipynb"
            assert where.is_file(), f"{stem} links to {target!r}: no such file beside the notebooks"
            if anchor:
                assert where.suffix == ".ipynb", f"{stem}: an anchor into {path!r}"
                assert anchor in _jupyterlab_ids(where.stem), f"{stem} links to {target!r}: no such heading"


def test_the_site_anchors_headings_as_jupyterlab_does():
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    assert generate.jupyterlab_slug("Glossary") == "Glossary"
    assert generate.jupyterlab_slug("1. Lease length against work time") == "1.-Lease-length-against-work-time"
    conf = (ROOT / "docs" / "conf.py").read_text()
    assert re.search(r'^myst_heading_slug_func = "generate\.jupyterlab_slug"$', conf, flags=re.M)


def _blocks(text: str, commented: bool = False) -> dict[str, list[str]]:
    """The lesson rows, the systems rows and the glossary's lines of a page (of a
    notebook's source when ``commented``), links made relative to the notebooks' folder."""
    lines = text.splitlines()
    if commented:
        lines = [line[2:] if line.startswith("# ") else line.lstrip("#") for line in lines]
    lines = [re.sub(r"\]\(notebooks/", "](", line) for line in lines]
    glossary = lines[next(i for i, line in enumerate(lines) if line == "## Glossary") :]
    return {
        "lessons": [line for line in lines if re.match(r"\| \[\d\d_\w+\]", line)],
        "systems": [line for line in lines if re.match(r"\| \*\*(Cloacina|Subspace|RiffDB)\*\*", line)],
        "glossary": [line for line in glossary if line.startswith(("- ", "  "))],
    }


def test_the_site_lists_the_lessons_the_systems_and_the_glossary_as_the_index_does():
    index = _blocks((NOTEBOOKS / "src" / "00_index.py").read_text(), commented=True)
    site = _blocks((ROOT / "docs" / "lessons" / "index.md").read_text())
    assert len(index["lessons"]) == len(LESSONS)
    for block in ("lessons", "systems", "glossary"):
        assert site[block] == index[block], f"docs/lessons/index.md and 00_index differ in their {block}"
