"""The documentation site, built as ``make docs`` builds it (warnings are
errors), and read in a real browser: Debian's Chromium, headless, driven by
playwright (no browser download), over a local HTTP server. It opens the
start page, an API page, a rendered lesson with its figures loaded, and a
search that finds ``check_leases``. Screenshots go to ``out/browser/``."""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "docs" / "_build" / "html"
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
    sphinx = Path(sys.executable).with_name("sphinx-build")
    built = subprocess.run(
        [str(sphinx), "-W", "--keep-going", "-q", "-b", "html", "docs", str(HTML)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-6000:]
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


@pytest.fixture(scope="module")
def page(site):
    _require_browser()
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=FLAGS)
        try:
            tab = browser.new_page(viewport={"width": 1280, "height": 900})
            tab.on("requestfailed", lambda r: FAILED.append(r.url) if r.url.startswith(site) else None)
            yield tab
        finally:
            browser.close()


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
