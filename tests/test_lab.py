"""`make lab`: JupyterLab on the course, with nbgrader's menu and no news pop-up.

Starts the server that `handson lab` starts (handson_lib.tools.lab.lab_command) on a free loopback
port, loads it in Debian's headless Chromium through Playwright, and checks what a student
sees: the course's folders, the notebooks in notebooks/, the "Nbgrader" menu, no news toast.
The screenshot is kept in tmp_path and copied to .handson/screenshots/lab.png for a human.
"""

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import CHROMIUM_ARGS
from handson_lib.tools import lab

ROOT = Path(__file__).resolve().parent.parent
SCREENSHOT_COPY = ROOT / ".handson" / "screenshots" / "lab.png"
COURSE_FOLDERS = ("notebooks", "solutions", "exercises")
START_TIMEOUT = 90  # seconds for the server to answer /api/status
UI_TIMEOUT_MS = 45_000  # for the page to show each expected element

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path, n=3000):
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


@pytest.fixture
def lab_server(tmp_path):
    """A JupyterLab server as `make lab` runs it, headless; yields (base_url, token, log_path)."""
    lab.install_settings()  # what `make setup` and `handson lab` do: the news switch
    port = _free_port()
    token = secrets.token_hex(16)
    home = tmp_path / "jupyter"
    # Keep the user's ~/.jupyter, lab workspaces and user settings out of it, both ways.
    env = dict(os.environ,
               JUPYTER_CONFIG_DIR=str(home / "config"),
               JUPYTER_DATA_DIR=str(home / "data"),
               JUPYTER_RUNTIME_DIR=str(home / "runtime"),
               JUPYTERLAB_SETTINGS_DIR=str(home / "lab-user-settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(home / "lab-workspaces"),
               IPYTHONDIR=str(home / "ipython"),
               PYTHONUNBUFFERED="1")
    env.pop("JUPYTER_TOKEN", None)
    cmd = lab.lab_command(port=port, ip="127.0.0.1", open_browser=False, token=token, root=ROOT)
    log_path = tmp_path / "jupyter-lab.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        status = urllib.request.Request(f"{base}/api/status",
                                        headers={"Authorization": f"token {token}"})
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited with {proc.returncode}:\n{_tail(log_path)}")
            try:
                with urllib.request.urlopen(status, timeout=5) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"jupyter lab did not answer on {base} within {START_TIMEOUT} s:\n"
                            f"{_tail(log_path)}")
            time.sleep(0.5)
        yield base, token, log_path
    finally:
        _stop(proc)


def _stop(proc):
    """SIGTERM, then SIGKILL, the server's whole process group (kernels, terminals)."""
    for sig, grace in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        # The leader is gone; make sure nothing it started outlives it.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        break
    proc.wait(timeout=5)


def _notification_defaults(base, token):
    """The news/update switches as the server hands them to the page (overrides applied)."""
    url = f"{base}/lab/api/settings/@jupyterlab/apputils-extension:notification"
    req = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        schema = json.load(resp)["schema"]
    return {k: v.get("default") for k, v in schema["properties"].items()}


def _check_png(path):
    from PIL import Image

    assert path.stat().st_size > 20_000, f"screenshot {path} is only {path.stat().st_size} bytes"
    with Image.open(path) as img:
        img.load()
        assert img.size[0] >= 800 and img.size[1] >= 600, img.size
        colors = img.convert("RGB").getcolors(maxcolors=1 << 16)
    assert colors is None or len(colors) > 50, f"screenshot {path} is (nearly) one colour"


def _item(page, listing, name):
    """The file browser's row for `name` (exact name, not a prefix)."""
    return listing.locator(".jp-DirListing-item").filter(has=page.get_by_text(name, exact=True))


def test_lab_shows_course_and_nbgrader_menu(chromium, lab_server, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    base, token, log_path = lab_server
    defaults = _notification_defaults(base, token)
    assert defaults.get("fetchNews") == "false" and defaults.get("checkForUpdates") is False, (
        f"the lab overrides ({lab.overrides_path()}) do not switch the news pop-up off: {defaults}")
    notebooks = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    shot = tmp_path / "lab.png"
    errors = []

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 800})
            page.set_default_timeout(UI_TIMEOUT_MS)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            try:
                page.goto(f"{base}/lab?token={token}", wait_until="domcontentloaded")

                # Menu bar: nbgrader's lab extension adds "Nbgrader" (id jp-mainmenu-nbgrader).
                nbgrader_menu = page.locator("#jp-menu-panel .lm-MenuBar-item",
                                             has_text="Nbgrader")
                expect(nbgrader_menu).to_have_count(1)

                # File browser at the course root: the course's folders.
                listing = page.locator(".jp-FileBrowser .jp-DirListing-content")
                for folder in COURSE_FOLDERS:
                    expect(_item(page, listing, folder)).to_be_visible()

                # Into notebooks/: every notebook there is listed.
                _item(page, listing, "notebooks").dblclick()
                expect(page.locator(".jp-FileBrowser .jp-BreadCrumbs")).to_contain_text("notebooks")
                assert notebooks, f"no *.ipynb in {ROOT / 'notebooks'}: the course has no notebooks"
                for name in notebooks:
                    expect(_item(page, listing, name)).to_be_visible()

                # Open the Nbgrader menu so that the screenshot shows its entries.
                nbgrader_menu.click()
                menu = page.locator("#jp-mainmenu-nbgrader")
                expect(menu).to_be_visible()
                expect(menu).to_contain_text("Formgrader")
                expect(menu).to_contain_text("Assignment List")

                # No toast (the news question or any other) once the app has settled.
                page.wait_for_timeout(1500)
                toast_texts = page.locator(".Toastify__toast").all_inner_texts()
            finally:
                page.screenshot(path=str(shot))  # also when a check above failed
                SCREENSHOT_COPY.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(shot, SCREENSHOT_COPY)
        finally:
            browser.close()

    assert not toast_texts, f"unexpected notification pop-up(s) {toast_texts} (see {SCREENSHOT_COPY})"
    _check_png(shot)
    assert not errors, f"JavaScript errors on the page: {errors}\n{_tail(log_path)}"
