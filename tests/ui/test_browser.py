"""The dashboard in a real browser: headless Chromium (Debian's `chromium` and `chromium-driver`) driven by
Selenium, against the simulated cluster after a demo-like history.

Every page is loaded and compared with `status -o json` and `inventory -o json`, links are followed, a
hostile commit message and a hostile annotation are shown as text and never run, pages read the same with
JavaScript off, and live updates arrive with it on. A screenshot of each page goes to
$DRA_GITOPS_SCREENSHOTS (default: the test's temporary directory).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from envs_support import HOSTILE_SUBJECT, Envs
from helpers import wait_for
from pass_support import TARGET
from ui_support import ANNOTATION_KEY, HOSTILE_ANNOTATION, HOSTILE_MESSAGE, World

from reconciler.ui.server import DashboardServer

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver") or (
    "/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None
)
try:
    from selenium import webdriver
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.remote.webdriver import WebDriver

    SELENIUM = True
except ImportError:  # pragma: no cover - the test extra installs it
    SELENIUM = False

pytestmark = pytest.mark.skipif(
    not (SELENIUM and CHROMIUM and CHROMEDRIVER),
    reason="browser tests need selenium (the test extra) and Debian's chromium and chromium-driver "
    "(apt-get install chromium chromium-driver): "
    + ", ".join(
        n
        for n, ok in (("selenium", SELENIUM), ("chromium", CHROMIUM), ("chromedriver", CHROMEDRIVER))
        if not ok
    )
    + " missing",
)


@pytest.fixture(scope="module")
def base_url(world: World) -> Iterator[str]:
    server = DashboardServer(world.dashboard, "127.0.0.1", 0)
    port = server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = Path(os.environ.get("DRA_GITOPS_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    where.mkdir(parents=True, exist_ok=True)
    return where


def _browser(javascript: bool, width: int = 1280, height: int = 1000, phone: bool = False) -> Any:
    options = webdriver.ChromeOptions()
    if phone:  # a desktop window is at least 500 px wide: a phone's viewport is emulated
        metrics = {"width": width, "height": height, "pixelRatio": 2.0, "touch": True}
        options.add_experimental_option("mobileEmulation", {"deviceMetrics": metrics})
        width, height = 600, 1000
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={width},{height}",
    ):
        options.add_argument(arg)
    if not javascript:
        options.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    # The system driver: Selenium Manager would try to download one (there is no network).
    service = webdriver.ChromeService(executable_path=str(CHROMEDRIVER))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(120)
    return driver


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    driver = _browser(javascript=True)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def plain_browser() -> Iterator[WebDriver]:
    driver = _browser(javascript=False)
    try:
        yield driver
    finally:
        driver.quit()


def pages(world: World) -> dict[str, str]:
    """Every page of the dashboard (one of each kind, the hostile commit's where there is a choice)."""
    denied = world.shas["denied"]
    return {
        "targets": "/",
        "history": f"/targets/{TARGET}/history",
        "commit": f"/targets/{TARGET}/commits/{denied}",
        "report": f"/targets/{TARGET}/commits/{denied}/report",
        "devices": "/devices",
        "devices-filtered": "/devices?namespace=ml-team",
    }


def nothing_ran(driver: Any) -> None:
    assert driver.execute_script("return typeof window.pwned") == "undefined"
    assert "pwned" not in driver.title


def main_text(driver: Any) -> str:
    return str(driver.find_element(By.ID, "main").get_attribute("textContent"))


def test_every_page_loads_shows_the_state_and_runs_nothing(
    browser: Any, base_url: str, world: World, shots: Path
) -> None:
    status = world.cli_json("status", "--target", TARGET, "--history", "100")
    inventory = world.cli_json("inventory")
    for name, path in pages(world).items():
        browser.get(base_url + path)
        wait_for(
            lambda: browser.execute_script("return document.readyState") == "complete", 60, f"{name} loaded"
        )
        nothing_ran(browser)
        assert browser.find_element(By.TAG_NAME, "h1").text
        browser.save_screenshot(str(shots / f"{name}.png"))
        text = main_text(browser)
        if name == "targets":
            row = browser.find_element(By.CSS_SELECTOR, "#targets tbody tr").text
            assert (
                TARGET in row
                and status["lastGood"][:12] in row
                and status["lastAttempted"]["sha"][:12] in row
            )
            assert "rolled-back" in row
        elif name == "history":
            ids = [
                int(e.get_attribute("data-record"))
                for e in browser.find_elements(By.CSS_SELECTOR, "#history tbody tr")
            ]
            assert ids == [r["id"] for r in status["history"]]
            # The hostile subject: cut in the table, whole on hover, and text either way.
            titles = [e.get_attribute("title") for e in browser.find_elements(By.CSS_SELECTOR, "bdi.cut")]
            assert HOSTILE_MESSAGE in titles
            assert browser.find_elements(By.CSS_SELECTOR, "tr.live-entry")
        elif name == "commit":
            assert HOSTILE_MESSAGE in text and world.shas["denied"] in text
        elif name == "report":
            assert "Denied" in text and "driver-canary" in text
        elif name == "devices":
            total = browser.find_element(By.CSS_SELECTOR, "#totals tbody tr:last-child").text.split()
            totals = inventory["totals"]
            assert total == ["Total", str(totals["devices"]), str(totals["allocated"]), str(totals["free"])]
            tiles = browser.find_elements(By.CSS_SELECTOR, "li.tile[data-device]")
            assert len(tiles) == totals["devices"]
            assert (
                sum(1 for t in tiles if t.get_attribute("data-state") == "allocated") == totals["allocated"]
            )
            assert ANNOTATION_KEY in text and HOSTILE_ANNOTATION in text
        elif name == "devices-filtered":
            states = {
                t.get_attribute("data-state")
                for t in browser.find_elements(By.CSS_SELECTOR, "li.tile[data-device]")
            }
            assert states == {"allocated"}
    # The hostile annotation, opened for the eye: still text, still nothing ran.
    browser.get(base_url + "/devices")
    for details in browser.find_elements(By.CSS_SELECTOR, "li.tile details summary"):
        details.click()
    assert HOSTILE_ANNOTATION in browser.find_element(By.ID, "main").text
    nothing_ran(browser)
    browser.save_screenshot(str(shots / "devices-annotations-open.png"))


def test_links_lead_where_they_say(browser: Any, base_url: str, world: World) -> None:
    browser.get(base_url + "/")
    browser.find_element(By.LINK_TEXT, TARGET).click()
    wait_for(lambda: browser.current_url.endswith(f"/targets/{TARGET}/history"), 60, "the history")
    browser.find_element(By.CSS_SELECTOR, f'#history a[title="{world.shas["denied"]}"]').click()
    wait_for(lambda: f"/commits/{world.shas['denied']}" in browser.current_url, 60, "the commit")
    browser.find_element(By.PARTIAL_LINK_TEXT, "Policy report").click()
    wait_for(lambda: browser.current_url.endswith("/report"), 60, "the report")
    assert "driver-canary" in main_text(browser)
    browser.find_element(By.PARTIAL_LINK_TEXT, "commit ").click()
    wait_for(
        lambda: (
            f"/commits/{world.shas['denied']}" in browser.current_url
            and not browser.current_url.endswith("/report")
        ),
        60,
        "the commit",
    )
    browser.find_element(By.LINK_TEXT, "Device map").click()
    wait_for(lambda: browser.current_url.endswith("/devices"), 60, "the device map")
    # The filter form (a plain GET): choosing a node shows that node's devices only.
    node = world.cli_json("inventory")["nodes"][1]["name"]
    select = browser.find_element(By.ID, "filter-node")
    select.find_element(By.CSS_SELECTOR, f'option[value="{node}"]').click()
    browser.find_element(By.CSS_SELECTOR, "form.filters button").click()
    wait_for(lambda: f"node={node}" in browser.current_url, 60, "the filtered map")
    rows = {r.get_attribute("data-node") for r in browser.find_elements(By.CSS_SELECTOR, ".node-row")}
    assert rows == {node}
    # A record's anchor on the history page (each unique, a rollback sharing its apply's id or not).
    browser.get(f"{base_url}/targets/{TARGET}/history#record-1")
    assert browser.execute_script("return document.querySelector(':target').dataset.record") == "1"


def test_keyboard_reaches_the_skip_link_first(browser: Any, base_url: str) -> None:
    browser.get(base_url + "/devices")
    browser.find_element(By.TAG_NAME, "body").send_keys(Keys.TAB)
    active = browser.switch_to.active_element
    assert active.get_attribute("class") == "skip" and active.is_displayed()
    active.send_keys(Keys.ENTER)
    assert browser.switch_to.active_element.get_attribute("id") == "main"


def test_pages_read_the_same_without_javascript(
    plain_browser: Any, base_url: str, world: World, shots: Path
) -> None:
    for name, path in pages(world).items():
        plain_browser.get(base_url + path)
        nothing_ran(plain_browser)
        text = main_text(plain_browser)
        assert text.strip(), name
        assert plain_browser.find_element(By.ID, "live").text == ""  # the script did not run
        if name == "commit":
            assert HOSTILE_MESSAGE in text
        if name == "devices":
            assert HOSTILE_ANNOTATION in text
        plain_browser.save_screenshot(str(shots / f"{name}-no-js.png"))


OUTSIDE = """return Array.from(document.querySelectorAll('body *'))
  .filter(e => !e.closest('.scroll, .skip') && e.getBoundingClientRect().right > window.innerWidth + 1)
  .map(e => e.tagName + '.' + e.className + ': ' + e.textContent.slice(0, 40));"""


def test_a_phone_sized_window_reads_every_page(base_url: str, shots: Path) -> None:
    phone = _browser(javascript=True, width=390, height=844, phone=True)
    try:
        for name, path in (
            ("devices", "/devices"),
            ("history", f"/targets/{TARGET}/history"),
            ("targets", "/"),
        ):
            phone.get(base_url + path)
            assert phone.execute_script("return window.innerWidth") == 390
            # Nothing sticks out of the viewport but inside a table's own scrolling box.
            assert phone.execute_script(OUTSIDE) == [], name
            phone.save_screenshot(str(shots / f"{name}-phone.png"))
    finally:
        phone.quit()


def test_live_updates_arrive_when_the_state_changes(browser: Any, base_url: str, world: World) -> None:
    browser.get(base_url + f"/targets/{TARGET}/history")
    wait_for(lambda: browser.find_element(By.ID, "live").text == "Live", 60, "the poller started")
    configmaps = world.client.resource_for("v1", "ConfigMap")
    world.client.patch_merge(
        configmaps,
        "dra-gitops",
        f"dra-gitops-{TARGET}",
        {"metadata": {"annotations": {"example.com/touched": "yes"}}},
    )
    wait_for(
        lambda: browser.find_element(By.ID, "live").text.startswith("Updated"),
        90,
        "a live update",
        interval=0.5,
    )
    nothing_ran(browser)
    assert browser.find_elements(By.CSS_SELECTOR, "#history tbody tr[data-record]")


def test_two_clusters_targets_page_and_a_map_per_cluster(
    browser: Any, plain_browser: Any, envs: Envs, shots: Path
) -> None:
    """Staging and production in clusters of their own, on the controller's port as `run` serves them:
    the Targets page with promotion, then each cluster's device map chosen with the form."""
    base = f"http://127.0.0.1:{envs.port}"
    two = envs.shas["two"]
    browser.set_window_size(1600, 1000)
    browser.get(base + "/")
    nothing_ran(browser)  # the awaited commit's subject is hostile
    rows = {
        r.find_element(By.CSS_SELECTOR, "td a").text: r.text
        for r in browser.find_elements(By.CSS_SELECTOR, "#targets tbody tr")
    }
    assert set(rows) == {"staging", "production"}
    for name, row in rows.items():
        status = envs.status(name)
        assert status["lastGood"][:12] in row and f"cluster {name}" in row
    assert f"dra-gitops approve --target production {two[:12]}" in rows["production"]
    assert HOSTILE_SUBJECT in rows["production"]
    browser.save_screenshot(str(shots / "targets-two-clusters.png"))
    # The promotion column, scrolled into view within the table's own scrolling box.
    browser.execute_script("document.querySelector('#targets').closest('.scroll').scrollLeft = 1e6")
    browser.save_screenshot(str(shots / "targets-two-clusters-promotion.png"))
    # The production cluster's map, from its row's link.
    browser.find_element(By.CSS_SELECTOR, 'a[href="/devices?cluster=production"]').click()
    wait_for(lambda: browser.current_url.endswith("/devices?cluster=production"), 60, "production's map")
    for cluster in ("production", "staging"):
        totals = envs.inventory(cluster)["totals"]
        tiles = browser.find_elements(By.CSS_SELECTOR, "li.tile[data-device]")
        assert len(tiles) == totals["devices"] > 0, cluster
        total = browser.find_element(By.CSS_SELECTOR, "#totals tbody tr:last-child").text.split()
        assert total == ["Total", str(totals["devices"]), str(totals["allocated"]), str(totals["free"])]
        assert browser.find_element(By.TAG_NAME, "h1").text.startswith(f"Device map of {cluster} (")
        browser.save_screenshot(str(shots / f"devices-{cluster}.png"))
        if cluster == "production":  # the other cluster, through the filter form's selector
            select = browser.find_element(By.ID, "filter-cluster")
            select.find_element(By.CSS_SELECTOR, 'option[value="staging"]').click()
            browser.find_element(By.CSS_SELECTOR, "form.filters button").click()
            wait_for(lambda: "cluster=staging" in browser.current_url, 60, "staging's map")
    # The commits' pages: staging's rollback rehearsals, production's approval.
    browser.get(base + f"/targets/staging/commits/{two}")
    assert "Rollback rehearsal: ✓ passed" in main_text(browser)
    browser.save_screenshot(str(shots / "commit-staging-rehearsal.png"))
    browser.get(base + f"/targets/production/commits/{envs.shas['one']}")
    approval = next(r["approval"] for r in envs.status("production")["history"] if r.get("approval"))
    assert f"by {approval['by']} at {approval['at']}" in browser.find_element(By.ID, "main").text
    nothing_ran(browser)
    browser.save_screenshot(str(shots / "commit-production-approval.png"))
    # Without JavaScript, the same Targets page reads the same.
    plain_browser.get(base + "/")
    nothing_ran(plain_browser)
    assert f"dra-gitops approve --target production {two[:12]}" in main_text(plain_browser)
    plain_browser.save_screenshot(str(shots / "targets-two-clusters-no-js.png"))


# ---- hostile strings, the login form (no world: plain data) ------------------------------------------------


class _Plain:
    """The pages' data as plain values: a failed commit with a 3,000-character subject and a U+202E in
    the file name of its failure."""

    def __init__(self) -> None:
        from reconciler.ui.targets import TargetView

        good, bad = "a" * 40, "b" * 40
        history = [
            {"id": 2, "sha": bad, "operation": "apply", "outcome": "apply-failed", "at": "2026-01-01T00:00:00Z",
             "message": "apply failed: manifests/\u202elmay.exe is not valid"},
            {"id": 1, "sha": good, "operation": "apply", "outcome": "applied", "at": "2026-01-01T00:00:00Z"},
        ]  # fmt: skip
        status = {
            "lastGood": good,
            "lastAttempted": {"sha": bad, "outcome": "apply-failed"},
            "history": history,
        }
        self.view = TargetView("prod", "dra-gitops", status, {bad: {"subject": "S" * 3000, "author": "x"}})

    def targets(self) -> list[Any]:
        return [self.view]

    def target(self, name: str, shas: Any = ()) -> Any:
        return self.view if name == "prod" else None

    def version(self) -> str:
        return "1"

    def devices(self, cluster: str = "") -> Any:
        return None


VISIBLE_OUTCOME = """return Array.from(document.querySelectorAll('[data-outcome="apply-failed"]'))
  .map(e => { const r = e.getBoundingClientRect(); const box = e.closest('.scroll') || document.body;
              return r.width > 0 && r.left >= box.getBoundingClientRect().left - 1
                     && r.top < 5000; });"""


@pytest.fixture(scope="module")
def plain_url() -> Iterator[str]:
    from reconciler.ui.app import Access, Dashboard

    token = "t" * 40
    server = DashboardServer(Dashboard(_Plain(), access=Access(token=token)), "127.0.0.1", 0)
    port = server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def test_login_form_then_hostile_strings_stay_in_their_place(
    plain_browser: Any, plain_url: str, shots: Path
) -> None:
    """Without JavaScript: the 401 page is a login form; the token given there becomes a session and
    never appears in a URL. Then a 3,000-character subject is cut (the outcome stays on screen) and a
    U+202E in a file name is shown as a mark, not obeyed."""
    for phone in (False, True):
        driver = plain_browser if not phone else _browser(javascript=False, width=390, height=844, phone=True)
        try:
            driver.delete_all_cookies()
            driver.get(plain_url + "/targets/prod/history")
            driver.find_element(By.NAME, "token").send_keys("t" * 40 + Keys.ENTER)
            wait_for(
                lambda d=driver: d.current_url.endswith("/targets/prod/history"), 60, "the page after login"
            )
            assert "t" * 40 not in driver.current_url
            cookie = driver.get_cookie("dra_gitops_session")
            assert cookie is not None and cookie["httpOnly"] and cookie["sameSite"] == "Lax"
            for path in ("/", "/targets/prod/history", f"/targets/prod/commits/{'b' * 40}"):
                driver.get(plain_url + path)
                nothing_ran(driver)
                assert all(driver.execute_script(VISIBLE_OUTCOME)), path
                text = main_text(driver)
                assert "\u202e" not in text and "⟨U+202E⟩lmay.exe" in text, path
                assert "S" * 200 not in text or path.startswith("/targets/prod/commits"), path
                driver.save_screenshot(
                    str(shots / f"hostile{path.replace('/', '-')}{'-phone' if phone else ''}.png")
                )
            if phone:
                assert driver.execute_script(OUTSIDE) == []
        finally:
            if phone:
                driver.quit()
