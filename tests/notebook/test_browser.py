"""The learner's release in a real JupyterLab, driven in headless Chromium (a notebook that passes
nbval can still show a widget as its text fallback, pick the wrong kernel, or show an error box).

The course served is a learner's release (andrea-release: no answer key, no hidden tests, the
untouched exercises): $ANDREA_RELEASE when set (`make test` passes the one it built), else one
built here. For every notebook: open it in JupyterLab, check the kernel is the course's
("ANDREA course"), Run All, then check that every cell ran and none shows an error, that no widget
fell back to its text form, that every cell meant to show a plot shows an image, that a quiz answers when clicked, and that exercise checks show their
boxes. Each test worker keeps one JupyterLab page open and opens its notebooks there one after
another (JupyterLab's own docmanager:open), closing each with its kernel when done: loading
JupyterLab afresh per notebook cost about 5 s of the browser's time each. This is also `make test`'s run of every notebook in the release: with Chromium absent the
Makefile runs them under nbval instead. A screenshot of each notebook goes to screenshots/
(ignored by git).

Runs when Chromium (/usr/bin/chromium or $CHROMIUM) and Playwright are present; .ci/run
installs Chromium first. Playwright drives the system's Chromium: it downloads no browser.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from plot_outputs import meant_to_plot

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SHOTS = ROOT / "screenshots"
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-quic"]
# ipywidgets' text fallback, shown when the widget manager is missing: "VBox(children=(...))".
WIDGET_FALLBACK = re.compile(r"\b(VBox|HBox|Box|RadioButtons|Button|IntSlider|FloatSlider|Dropdown|"
                             r"Output|HTML|Accordion|ToggleButtons|Checkbox)\((children|value|options|description|layout)=")
RUN_TIMEOUT_MS = 180_000

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs it)"),
    pytest.mark.skipif(not NOTEBOOKS, reason="no notebooks yet"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    """A learner's release: $ANDREA_RELEASE, or one built here (andrea_course.release)."""
    given = os.environ.get("ANDREA_RELEASE")
    if given:
        if not (Path(given) / "notebooks").is_dir() or (Path(given) / "solutions").exists():
            pytest.fail(f"ANDREA_RELEASE={given} is not a learner's release (andrea-release writes one)")
        return Path(given)
    from andrea_course.release import build
    return build(tmp_path_factory.mktemp("release") / "course", quiet=True)


@pytest.fixture(scope="module")
def lab(release, tmp_path_factory):
    """A JupyterLab server on loopback, serving a copy of the release's notebooks/ (runs never
    touch it); its kernels import the release's andrea_course and judge its exercises/."""
    work = tmp_path_factory.mktemp("lab")
    shutil.copytree(release / "notebooks", work / "notebooks")
    env = dict(os.environ)
    env.pop("ANDREA_IMPL", None)              # what a learner sees: their own exercises/
    env["PYTHONPATH"] = str(release)          # the release's package, not this checkout's
    port, token = _free_port(), secrets.token_hex(16)
    jupyter_lab = Path(sys.executable).with_name("jupyter-lab")
    # Every cell in the page (no windowed rendering), so all prompts and outputs can be read;
    # no news pop-up over the screenshot.
    settings = work / "settings"
    for plugin, values in {"notebook-extension/tracker": {"windowingMode": "none"},
                           "apputils-extension/notification": {"fetchNews": "false"}}.items():
        path = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    env["JUPYTERLAB_SETTINGS_DIR"] = str(settings)
    env["JUPYTERLAB_WORKSPACES_DIR"] = str(work / "workspaces")   # no tabs restored from earlier runs
    log = open(work / "server.log", "w")
    server = subprocess.Popen(
        [str(jupyter_lab), "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={work / 'notebooks'}",
         "--allow-root", "--LabApp.news_url=", "--ServerApp.open_browser=False",
         "--LabApp.expose_app_in_browser=True"],          # window.jupyterapp: open and close notebooks
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"JupyterLab did not start: {(work / 'server.log').read_text()[-2000:]}")
            time.sleep(0.3)
    try:
        yield url, token
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


class LabPage:
    """One JupyterLab page, opened once and reused for every notebook of this worker; a test that
    fails leaves it closed, and the next test opens a fresh one."""

    def __init__(self, browser, url: str, token: str):
        self.browser, self.url, self.token, self.page = browser, url, token, None

    def open(self, name: str):
        if self.page is None:
            self.page = self.browser.new_page(viewport={"width": 1400, "height": 1000})
            self.page.goto(f"{self.url}/lab?reset&token={self.token}")
            self.page.wait_for_function("() => window.jupyterapp && window.jupyterapp.started", timeout=60_000)
            self.page.evaluate("() => window.jupyterapp.restored.then(() => true)")
        self.page.evaluate("name => window.jupyterapp.commands.execute('docmanager:open', {path: name}).then(() => true)",
                           name)
        return self.page

    def close_notebooks(self) -> None:
        """Every open document closed, unsaved, and its kernel told to shut down (not waited for:
        the server ends it while the next notebook opens)."""
        self.page.evaluate("""() => {
            const app = window.jupyterapp;
            for (const w of Array.from(app.shell.widgets('main'))) {
                const session = w.sessionContext && w.sessionContext.session;
                if (session) { app.serviceManager.sessions.shutdown(session.id).catch(() => {}); }
                w.dispose();
            } }""")

    def discard(self) -> None:
        if self.page is not None:
            self.page.close()
            self.page = None


@pytest.fixture(scope="module")
def lab_page(lab, browser):
    shared = LabPage(browser, *lab)
    yield shared
    shared.discard()


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=[n.stem for n in NOTEBOOKS])
def test_notebook_in_jupyterlab(nb, release, lab_page):
    code = [c["source"] for c in json.loads((release / "notebooks" / nb.name).read_text())["cells"]
            if c["cell_type"] == "code"]                 # the notebook served: the release's copy
    src = "\n".join("".join(lines) for lines in code)
    page = lab_page.open(nb.name)
    done = False
    try:
        page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell", timeout=60_000)
        kernel = page.locator(".jp-Toolbar .jp-KernelName, .jp-Toolbar-kernelName").first
        try:
            page.wait_for_function(
                "() => [...document.querySelectorAll('.jp-Toolbar-kernelName, .jp-KernelName')]"
                ".some(e => e.textContent.includes('ANDREA course'))", timeout=60_000)
        except playwright_api.TimeoutError:
            pytest.fail(f"{nb.name} opened with kernel {kernel.inner_text()!r}, expected the course's "
                        f"'ANDREA course' (is the notebook's kernelspec 'andrea' and `make setup` run?)")
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000)

        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        # Done when some cell has run and none is queued or running ([*]): either every code cell
        # has its execution count, or an error stopped Run All (the cells after it show [ ]).
        prompts_js = """() => [...document.querySelectorAll(
            '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputArea-prompt')].map(p => p.textContent.trim())"""
        page.wait_for_function(
            f"""() => {{ const p = ({prompts_js})();
                        return p.some(t => /^\\[\\d+\\]:$/.test(t)) && !p.some(t => t === '[*]:'); }}""",
            timeout=RUN_TIMEOUT_MS, polling=250)
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000)
        prompts = page.evaluate(prompts_js)
        ran = sum(bool(re.fullmatch(r"\[\d+\]:", t)) for t in prompts)
        outputs_js = """() => [...document.querySelectorAll(
            '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output')].map(o => o.innerText)"""
        try:                          # widget views render after their cell has run: give them 5 s
            page.wait_for_function(f"fallback => !({outputs_js})().some(t => new RegExp(fallback).test(t))",
                                   arg=WIDGET_FALLBACK.pattern, timeout=5_000, polling=100)
        except playwright_api.TimeoutError:
            pass                      # named below

        panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
        texts = page.evaluate(outputs_js)
        errors = [t for t in texts if "Traceback" in t or re.search(r"^\w+Error: ", t, re.M)]
        assert not errors, f"{nb.name}: a cell shows an error:\n{errors[0][:1500]}"
        assert len(prompts) >= len(code) and ran == len(prompts), \
            f"{nb.name}: Run All stopped after {ran} of {len(prompts)} code cells, with no error shown"
        fallback = [t for t in texts if WIDGET_FALLBACK.search(t)]
        assert not fallback, f"{nb.name}: a widget shows as its text fallback: {fallback[0][:300]}"
        # Every cell meant to show a plot (tests/plot_outputs.py) shows an image, in the cell's own
        # output or in a widget's inside it.
        drawn = page.evaluate("""() => [...document.querySelectorAll(
            '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell')].map(c => c.querySelector('.jp-OutputArea-output img') !== null)""")
        blank = [i for i, (lines, img) in enumerate(zip(code, drawn)) if meant_to_plot("".join(lines)) and not img]
        assert not blank, f"{nb.name}: code cells {blank} are meant to show a plot and show no image"

        if "check(" in src:
            n_boxes = panel.locator(".andrea-box").count()
            assert n_boxes > 0, f"{nb.name}: calls check(...) but shows no check box"
        if "quiz(" in src:
            radios = panel.locator(".widget-radio-box")
            assert radios.count() > 0, f"{nb.name}: calls quiz(...) but no radio buttons rendered"
            question = radios.first.locator("xpath=ancestor::div[contains(@class, 'widget-vbox')][1]")
            radios.first.locator("input[type=radio]").first.check()
            question.locator("button:has-text('Check')").first.click()
            page.wait_for_function(
                "el => /Right\\.|Not quite/.test(el.innerText)", arg=question.element_handle(),
                timeout=10_000)
        SHOTS.mkdir(exist_ok=True)
        first_box = panel.locator(".andrea-box").first
        if first_box.count():
            first_box.scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / f"{nb.stem}.png"))
        lab_page.close_notebooks()
        done = True
    finally:
        if not done:
            lab_page.discard()          # whatever state the failure left, the next test starts afresh
