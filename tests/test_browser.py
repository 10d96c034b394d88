"""The notebooks in a real browser, from the server ``make lab`` starts.

Headless Chromium (Debian's ``chromium``, driven by the ``playwright`` package
through ``executable_path``: no browser download) opens JupyterLab as ``make
lab`` serves it, on a copy of ``notebooks/`` (Run All and autosave must not
rewrite the committed files), and for every notebook:

* on opening, before any cell runs: the saved widgets are drawn as controls —
  no raw ``Name(children=...)`` text and no "Error displaying widget" — each
  with a plain-words note that it needs a running kernel (a saved control
  shows JupyterLab's broken-link icon until its cell runs); the document is not
  marked modified (the saved kernelspec is the one JupyterLab writes); no cell
  output is wider than the page, and no test marker (``NBVAL``) shows;
* after Run All: no error output, no traceback, every code cell executed, every
  exercise's solution marked right by the checker, and each exercise's typical
  mistake, checked in the notebook's kernel, given a hint; each control's
  redraw is timed (printed).

The landing page is the index, and the file browser shows the notebooks and
not their sources. Screenshots go to ``out/browser/``. Without chromium or
playwright the test is skipped with the reason — and fails when ``CI=true``,
so CI cannot pass without it (``.ci/run`` installs chromium when missing).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
SHOTS = ROOT / "out" / "browser"
TOKEN = "fanoutsim-browser-test"
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the notebook in front
RAW_WIDGET = re.compile(r"\b[A-Z][A-Za-z]*\((children|value|layout|description)=")
OPEN_TIMEOUT_MS = 120_000
RUN_TIMEOUT_S = 420  # the slowest notebook runs for about a minute
OPEN_ATTEMPTS = 3
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-dev-shm-usage",
]


def _missing() -> str | None:
    if shutil.which("chromium") is None:
        return "no chromium on PATH (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "no playwright package (pip install playwright; no browser download is needed)"
    if shutil.which("make") is None:
        return "no make to start the server as `make lab` does"
    return None


def _require_browser() -> None:
    reason = _missing()
    if reason is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the browser test cannot run in CI: {reason}")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, method: str = "GET"):
    req = urllib.request.Request(url, method=method, headers={"Authorization": f"token {TOKEN}"})
    with urllib.request.urlopen(req, timeout=10) as reply:
        body = reply.read()
        return json.loads(body) if body else None


def _notebook_names() -> list[str]:
    return sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """``make lab`` on a copy of the notebooks; yields the base URL."""
    _require_browser()
    home = tmp_path_factory.mktemp("lab")
    folder = home / "notebooks"
    folder.mkdir()
    for nb in NOTEBOOKS.glob("*.ipynb"):
        shutil.copy2(nb, folder / nb.name)
    shutil.copytree(NOTEBOOKS / "src", folder / "src")  # there, as in the repository: to be hidden
    shutil.copytree(
        NOTEBOOKS / "experiments", folder / "experiments", ignore=shutil.ignore_patterns("__pycache__")
    )  # the lessons import them
    shutil.copy2(NOTEBOOKS / "build.py", folder / "build.py")
    (home / "data").symlink_to(ROOT / "data")  # the notebooks read ../data
    (home / "fanoutsim").symlink_to(ROOT / "fanoutsim")  # and the examples in ../fanoutsim/examples
    news = home / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True)
    news.write_text(json.dumps({"fetchNews": "false"}))  # no "get notified about Jupyter news?" toast
    tracker = home / "settings" / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text(json.dumps({"windowingMode": "none"}))  # every cell laid out: widths can be measured
    port = _free_port()
    env = {
        **{k: v for k, v in os.environ.items() if k != "MPLBACKEND"},  # the kernels draw inline
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_DATA_DIR": str(home / "data-dir"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }
    flags = (
        f"--no-browser --ServerApp.ip=127.0.0.1 --ServerApp.port={port} --ServerApp.port_retries=0 "
        f"--IdentityProvider.token={TOKEN} --LabApp.news_url=None --ServerApp.log_level=WARN "
        "--LabApp.expose_app_in_browser=True"
    )  # window.jupyterapp: open, run and close by command
    log = open(home / "lab.log", "w")
    proc = subprocess.Popen(
        [
            "make",
            "-s",
            "--no-print-directory",
            "lab",
            f"BIN={Path(sys.executable).parent}",
            "STAMP=",
            f"LAB_DIR={folder}",
            f"LAB_FLAGS={flags}",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                _get(f"{base}/api/status")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    pytest.fail("make lab did not start a server:\n" + (home / "lab.log").read_text()[-3000:])
                time.sleep(0.5)
        yield base, folder, home
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


@pytest.fixture(scope="module")
def browser(lab):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def _new_page(browser, base, path: str = "lab"):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(OPEN_TIMEOUT_MS)
    page.goto(f"{base}/{path}{'&' if '?' in path else '?'}token={TOKEN}")  # the token becomes a cookie
    return context, page


@pytest.fixture(scope="module")
def lab_page(lab, browser):
    """One JupyterLab window for every notebook, as a reader keeps one open."""
    base, _, _ = lab
    context, page = _new_page(browser, base, "lab?reset")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=OPEN_TIMEOUT_MS)
    page.evaluate("() => window.jupyterapp.restored")
    try:
        yield page
    finally:
        context.close()


def _shut_down_kernels(base: str) -> None:
    for session in _get(f"{base}/api/sessions") or ():
        _get(f"{base}/api/sessions/{session['id']}", method="DELETE")


def _outputs_text(page) -> str:
    return page.eval_on_selector_all(f"{PANEL} .jp-OutputArea-output", "els => els.map(e => e.textContent).join('\\n')")


def _widget_outputs(name: str) -> int:
    """Saved outputs that are a widget view of a model in the saved state."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    count = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            view = out.get("data", {}).get("application/vnd.jupyter.widget-view+json")
            if view and view.get("model_id") in state:
                count += 1
    return count


def _screenshot(page, path: Path) -> None:
    """The first widget if there is one (else the top of the notebook), as the reader sees it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    widget = page.locator(f"{PANEL} .jp-OutputArea-output > .jupyter-widgets").first
    target = widget if widget.count() else page.locator(f"{PANEL} .jp-Cell").first
    target.scroll_into_view_if_needed()
    page.wait_for_timeout(800)  # cells scrolled into view are painted lazily
    page.screenshot(path=str(path))


def _check_rendered(text: str) -> None:
    assert "Error displaying widget" not in text
    raw = RAW_WIDGET.search(text)
    assert raw is None, f"a widget shows as raw text: {text[max(0, raw.start() - 80) : raw.end() + 120]!r}"


# JavaScript run in the page, on the notebook in front
_CURRENT = "const w = window.jupyterapp.shell.currentWidget;"
_STATE = (
    _CURRENT
    + """
  const cells = w.content.widgets.filter(c => c.model.type === 'code');
  const errors = [];
  for (const c of cells) for (let i = 0; i < c.model.outputs.length; i++) {
    const o = c.model.outputs.get(i);
    if (o.type === 'error') errors.push(o.toJSON().ename + ': ' + o.toJSON().evalue);
  }
  return {done: cells.every(c => c.model.executionCount !== null),
          status: w.sessionContext.session && w.sessionContext.session.kernel
                  ? w.sessionContext.session.kernel.status : 'none', errors: errors, code: cells.length};
"""
)


def test_make_lab_opens_the_index_with_the_sources_hidden(lab, browser):
    base, _, _ = lab
    context, page = _new_page(browser, base, "lab?reset")
    try:
        page.goto(f"{base}/")  # where `make lab` sends the browser
        page.wait_for_selector(f"{PANEL} .jp-RenderedMarkdown h1")
        assert "00_index.ipynb" in page.url
        assert "Notebooks" in page.locator(f"{PANEL} .jp-RenderedMarkdown h1").first.inner_text()
        listing = page.locator(".jp-DirListing-content .jp-DirListing-itemText")
        listing.first.wait_for()
        names = set(listing.all_inner_texts())
        assert set(_notebook_names()) <= names
        assert "src" not in names and "build.py" not in names
        _screenshot(page, SHOTS / "00_lab_landing.png")
    finally:
        context.close()
        _shut_down_kernels(base)


@pytest.mark.parametrize("name", _notebook_names())
def test_a_notebook_renders_its_widgets_and_runs_clean(lab, lab_page, name):
    base, _, _ = lab
    page = lab_page
    stem = name.removesuffix(".ipynb")
    started = time.monotonic()
    try:
        for attempt in range(1, OPEN_ATTEMPTS + 1):
            text = _open(page, name, stem)
            # jupyterlab_widgets restores a notebook's saved widgets and, on the kernel's
            # "connected", the kernel's, in parallel: when the kernel's finishes first it
            # declares the manager restored and a view still waiting for its saved model
            # says "model not found" for good. That upstream race shows on a busy machine
            # only; a fresh open draws it. Anything else fails at once.
            if "Error displaying widget: model not found" not in text or attempt == OPEN_ATTEMPTS:
                break
            print(f"{name}: 'model not found' on open {attempt} (the widget manager's restore race); again")
            _close(page, base)
        _check_rendered(text)
        drawn = f"document.querySelectorAll('{PANEL} .jp-OutputArea-output > .jupyter-widgets').length"
        assert page.evaluate(f"() => {drawn}") >= _widget_outputs(name), "saved widgets were not drawn"
        _check_controls_say_they_need_a_kernel(page)
        _check_no_output_wider_than_the_page(page)
        _check_no_test_marker(page)
        assert not page.evaluate(f"() => {{ {_CURRENT} return w.context.model.dirty; }}"), (
            "opening the notebook marked it modified (a kernelspec other than JupyterLab's?)"
        )

        opened = time.monotonic() - started

        # Run All on cleared outputs; the command's promise settles when every cell has run
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
        assert page.evaluate(
            f"() => {{ {_CURRENT} return w.content.widgets.every("
            "c => c.model.type !== 'code' || c.model.outputs.length === 0); }"
        )
        page.evaluate(
            "() => { window.__ranAll = null; window.jupyterapp.commands.execute('notebook:run-all-cells')"
            ".then(ok => { window.__ranAll = {ok: ok}; }, e => { window.__ranAll = {error: String(e)}; }); }"
        )
        ran = time.monotonic()
        while True:
            # the result first, then the cells: a state read before the result may be
            # from the kernel's idle moment between the last two cells
            result = page.evaluate("() => window.__ranAll")
            state = page.evaluate(f"() => {{ {_STATE} }}")
            assert not state["errors"], f"{name}: {state['errors'][0]}"
            if result is not None and state["status"] == "idle":
                break
            assert time.monotonic() - ran < RUN_TIMEOUT_S, f"{name}: Run All did not finish: {state}"
            page.wait_for_timeout(250)
        assert result == {"ok": True}, f"{name}: Run All reported {result}"
        assert state["done"], f"{name}: a code cell did not run"
        print(
            f"{name}: opened and checked in {opened:.1f} s, Run All took {time.monotonic() - ran:.1f} s "
            f"({state['code']} code cells)"
        )
        page.wait_for_timeout(1000)  # the last outputs are drawn
        _screenshot(page, SHOTS / f"{stem}-ran.png")
        errors = page.eval_on_selector_all(
            f"{PANEL} .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
            "els => els.map(e => e.textContent)",
        )
        bad = [e for e in errors if "Traceback" in e or "Error" in e]
        assert not bad, bad[0][:2000]
        text = _outputs_text(page)
        assert "Traceback (most recent call last)" not in text
        _check_rendered(text)
        _check_exercises(page, stem)
        _time_controls(page, name)
    finally:
        _close(page, base)


def _open(page, name: str, stem: str) -> str:
    """Open ``name`` as a reader does (its kernel starts), wait for its saved widgets
    to be drawn; a screenshot; the text of its outputs."""
    page.evaluate(
        "async name => { const w = await window.jupyterapp.commands.execute("
        "'docmanager:open', {path: name, factory: 'Notebook'});"
        " await w.context.ready; await w.sessionContext.ready; }",
        name,
    )
    page.wait_for_selector(f"{PANEL} .jp-Cell", state="attached")
    deadline = time.monotonic() + 120
    while page.evaluate(f"() => {{ {_STATE} }}")["status"] != "idle":  # the kernel is up: JupyterLab has
        assert time.monotonic() < deadline, "the kernel did not start"  # written kernelspec and language
        page.wait_for_timeout(250)
    expected = _widget_outputs(name)
    drawn = f"document.querySelectorAll('{PANEL} .jp-OutputArea-output > .jupyter-widgets').length"
    if expected:
        try:
            page.wait_for_function(f"n => {drawn} >= n", arg=expected, timeout=60_000)
        except Exception:  # noqa: BLE001 - the checks below say what is on the page instead of "timeout"
            pass
    page.wait_for_timeout(1000)  # let the last metadata updates land
    _screenshot(page, SHOTS / f"{stem}-opened.png")
    return _outputs_text(page)


def _close(page, base: str) -> None:
    """Close the notebook in front unsaved and stop its kernel."""
    page.evaluate(
        f"async () => {{ {_CURRENT} if (w && w.sessionContext) {{ await w.sessionContext.shutdown(); w.dispose(); }} }}"
    )
    _shut_down_kernels(base)


# -- what a learner meets: notes beside controls, widths, markers, exercises -------------------------

_NOTE = "needs a running kernel"


def _check_controls_say_they_need_a_kernel(page) -> None:
    """Every control drawn from the saved state (JupyterLab marks it with the
    broken-link icon until its cell runs) has the note beside it, in plain words."""
    found = page.eval_on_selector_all(
        f"{PANEL} .jp-OutputArea-output > .jupyter-widgets",
        "els => els.map(e => ({note: (e.querySelector('.fanoutsim-kernel-note') || {}).textContent || '',"
        " broken: !!e.querySelector('.jupyter-widgets-disconnected') || e.matches('.jupyter-widgets-disconnected'),"
        " text: e.textContent.slice(0, 120)}))",
    )
    for control in found:
        assert _NOTE in control["note"] and "Run this cell" in control["note"], (
            f"a control without its note ({'broken link' if control['broken'] else 'drawn'}): {control['text']!r}"
        )


def _check_no_output_wider_than_the_page(page) -> None:
    wide = page.eval_on_selector_all(
        f"{PANEL} .jp-OutputArea-output",
        "els => els.filter(e => e.scrollWidth > e.clientWidth + 2 && e.clientWidth > 0)"
        ".map(e => e.scrollWidth + ' > ' + e.clientWidth + ': ' + e.textContent.slice(0, 100))",
    )
    assert not wide, f"an output wider than the page: {wide[0]}"


def _check_no_test_marker(page) -> None:
    shown = page.eval_on_selector_all(f"{PANEL} .jp-Cell", "els => els.map(e => e.textContent).join('\\n')")
    assert "NBVAL" not in shown, "a test marker shows; nbval's markers are cell tags"


_IN_KERNEL = """async (code) => {
  const w = window.jupyterapp.shell.currentWidget;
  const future = w.sessionContext.session.kernel.requestExecute({code: code, store_history: false});
  let text = '';
  future.onIOPub = msg => {
    if (msg.header.msg_type === 'stream') text += msg.content.text;
    if (msg.header.msg_type === 'error') text += 'ERROR ' + msg.content.ename + ': ' + msg.content.evalue;
  };
  await future.done;
  return text;
}"""


def _check_exercises(page, stem: str) -> None:
    """Every solution cell ran and was marked right; in the notebook's kernel,
    each exercise's typical mistake gets what is off and a hint."""
    solutions = page.evaluate(
        f"() => {{ {_CURRENT} return w.content.widgets"
        ".filter(c => (c.model.getMetadata('tags') || []).includes('solution'))"
        ".map(c => JSON.stringify(c.model.outputs.toJSON())); }"
    )
    for outputs in solutions:
        assert "Exercise" in outputs and "right." in outputs, f"{stem}: a solution not marked right: {outputs[:300]}"
    if stem == "00_index":
        return
    code = (
        "from fanoutsim import exercises as _ex\n"
        f"for _e in _ex.exercises({int(stem[:2])}):\n"
        "    _v = _ex.check(_e.id, _e.mistake)\n"
        "    print(_e.id, 'right' if _v.right else ('hint' if _v.hint else 'no hint'))"
    )
    said = page.evaluate(_IN_KERNEL, code).split()
    assert "ERROR" not in said, said
    verdicts = dict(zip(said[::2], said[1::2]))
    assert len(verdicts) == len(solutions) >= 2 and set(verdicts.values()) == {"hint"}, verdicts


def _time_controls(page, name: str) -> None:
    """Move every control of the lesson once in its kernel and print how long the
    redraw took (the aim: under a second on two cores)."""
    code = """
import json as _json, time as _time
from fanoutsim import lesson as _lesson
from fanoutsim.widgets import PruneControl as _Prune, SweepExplorer as _Sweep
_took = {}
for _k, _v in list(globals().items()):
    _t = _time.perf_counter()
    if isinstance(_v, _lesson.Explorer):
        _v.set(**{n: next(o for o in opts if o != _v.setting[n]) for n, opts in _v.options.items()
                  if len(opts) > 1})
    elif isinstance(_v, _Prune):
        _v.retention.value = 90.0 if _v.retention.value != 90.0 else 120.0
    elif isinstance(_v, _Sweep):
        _v.budget.value = 3.0 if _v.budget.value != 3.0 else 1.5
    else:
        continue
    _took[_k] = round(_time.perf_counter() - _t, 2)
print(_json.dumps(_took))
"""
    out = page.evaluate(_IN_KERNEL, code).strip()
    assert "ERROR" not in out, out
    print(f"{name}: control redraws (s): {out}")


def test_without_chromium_it_skips_with_the_reason_and_fails_in_ci(monkeypatch):
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "chromium" else real_which(name))
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="no chromium"):
        _require_browser()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="cannot run in CI: no chromium"):
        _require_browser()
