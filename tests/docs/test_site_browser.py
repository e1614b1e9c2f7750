"""The docs site in headless Chromium: the compatibility selector against its JSON, the
explanation of an empty choice, a copied command against `envgen resolve`, shared links, and
the page at phone width (390 px) — with screenshots at desktop and phone width."""

from __future__ import annotations

import json
import shlex
import time

import pytest
from support.run import run_envgen

from envgen.results.selector import COLUMNS, FILTERS, make_command

pytestmark = [pytest.mark.integration, pytest.mark.browser]

PAGE = 50  # rows the page shows before "Show more" (docs/js/selector.js)


@pytest.fixture(scope="module")
def data(built_site) -> dict:
    return json.loads((built_site / "selector.json").read_text(encoding="utf-8"))


def _wait(condition, timeout: float = 20.0, what: str = "the condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _errors(driver) -> list[dict]:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _open(driver, url: str) -> None:
    from selenium.webdriver.common.by import By

    driver.get(url)
    root = driver.find_element(By.ID, "envgen-selector")
    _wait(lambda: root.get_attribute("data-ready") == "true", what="the selector's data")


def _choose(driver, **values: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    for name, value in values.items():
        Select(driver.find_element(By.CSS_SELECTOR, f'[data-filter="{name}"]')) \
            .select_by_value(value)


def _rows(driver) -> list[tuple[str, str]]:
    from selenium.webdriver.common.by import By

    return [(r.get_attribute("data-combination"), r.get_attribute("data-tier"))
            for r in driver.find_elements(By.CSS_SELECTOR, "[data-rows] tr[data-combination]")]


def _expected(data: dict, selection: dict[str, str]) -> list[tuple[str, str]]:
    """The rows the page must show for ``selection``, computed here from the JSON."""
    col = {c: i for i, c in enumerate(COLUMNS)}
    axes = data["axes"]
    arch_of = {g["name"]: g["arch"] for g in data["gpus"]} | {a: a for a in data["archs"]}
    out = []
    for row in data["rows"]:
        f = {n: axes[n][row[col[n]]] for n in ("framework", "torch", "cuda", "python", "os")}
        f["framework_version"] = axes["framework_version"][row[col["framework_version"]]][1]
        tier = row[col["tier"]]
        ok = all(f[n] == v for n, v in selection.items() if n in f)
        if "tier" in selection:
            ok = ok and tier >= axes["tier"].index(selection["tier"])
        if "gpu" in selection:
            s = row[col["arch_set"]]
            archs = {data["archs"][i] for i in data["arch_sets"][s]} if s >= 0 else set()
            ok = ok and arch_of[selection["gpu"]] in archs
        if ok:
            cid = (f"{f['framework']}-{f['framework_version']}-torch{f['torch']}-cu"
                   f"{f['cuda'].replace('.', '')}-py{f['python']}-{f['os'].replace('-', '')}"
                   f"-x86_64")
            out.append((cid, axes["tier"][tier]))
    return out


def _count(driver) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, "[data-count]").text


def test_pages_load_without_console_errors(browser, site_url):
    from selenium.webdriver.common.by import By

    browser.get_log("browser")  # start clean
    _open(browser, f"{site_url}/compatibility/")
    browser.get(f"{site_url}/images/")
    images = browser.find_element(By.ID, "envgen-images")
    _wait(lambda: images.get_attribute("data-ready") == "true", what="the images list")
    assert "publish" in images.find_element(By.CSS_SELECTOR, "[data-count]").text
    for page in ("", "quickstart/", "concepts/", "cli/", "broken-environment/",
                 "before-you-launch/", "gpu-runners/", "schemas/"):
        browser.get(f"{site_url}/{page}")
        _wait(lambda: browser.execute_script("return document.readyState") == "complete")
    assert _errors(browser) == []


def test_every_control_is_labelled_and_the_markup_is_stable(browser, site_url, data):
    from selenium.webdriver.common.by import By

    _open(browser, f"{site_url}/compatibility/")
    for name in FILTERS:
        control = browser.find_element(By.CSS_SELECTOR, f'[data-filter="{name}"]')
        label = browser.find_element(By.CSS_SELECTOR, f'label[for="{control.get_attribute("id")}"]')
        assert label.text.strip()
        assert control.tag_name == "select"
    rows = _rows(browser)
    assert len(rows) == PAGE
    assert rows == _expected(data, {})[:PAGE]
    assert _count(browser).startswith(f"{len(data['rows']):,} of {len(data['rows']):,}")
    for command in browser.find_elements(By.CSS_SELECTOR, "[data-rows] [data-command]"):
        assert command.get_attribute("data-command").startswith("envgen make --framework ")


def test_keyboard_alone_changes_a_filter(browser, site_url, data):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    _open(browser, f"{site_url}/compatibility/")
    control = browser.find_element(By.CSS_SELECTOR, '[data-filter="framework"]')
    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.TAB)
    for _ in range(60):  # tab through the page until the first control has the focus
        if browser.switch_to.active_element == control:
            break
        browser.switch_to.active_element.send_keys(Keys.TAB)
    assert browser.switch_to.active_element == control
    control.send_keys(Keys.ARROW_DOWN)
    chosen = control.get_attribute("value")
    assert chosen == data["axes"]["framework"][0]
    _wait(lambda: _rows(browser) == _expected(data, {"framework": chosen})[:PAGE],
          what="the rows of the framework chosen with the keyboard")


@pytest.mark.parametrize("selection", [
    {"framework": "deepspeed", "cuda": "12.1"},
    {"framework": "megatron-core", "python": "3.12", "os": "ubuntu-24.04", "gpu": "H100"},
    {"cuda": "12.8", "gpu": "sm_120", "tier": "T1"},
], ids=["framework-cuda", "four-filters-gpu-name", "arch-and-tier"])
def test_choices_give_the_rows_of_the_json(browser, site_url, data, selection):
    _open(browser, f"{site_url}/compatibility/")
    _choose(browser, **selection)
    expected = _expected(data, selection)
    assert expected, f"the data has no row for {selection}: pick another case"
    _wait(lambda: _rows(browser) == expected[:PAGE], what=f"the rows of {selection}")
    assert _count(browser).startswith(f"{len(expected):,} of ")


def test_show_more_adds_the_next_rows(browser, site_url, data):
    from selenium.webdriver.common.by import By

    _open(browser, f"{site_url}/compatibility/?framework=deepspeed")
    expected = _expected(data, {"framework": "deepspeed"})
    assert len(expected) > 2 * PAGE
    browser.find_element(By.CSS_SELECTOR, "[data-more]").click()
    _wait(lambda: _rows(browser) == expected[:2 * PAGE], what="100 rows")


def test_an_empty_choice_says_why_and_offers_the_nearest_rows(browser, site_url, data):
    from selenium.webdriver.common.by import By

    key = next(k for k in data["explanations"] if k.startswith("framework=") and "&cuda=" in k)
    selection = dict(part.split("=", 1) for part in key.split("&"))
    _open(browser, f"{site_url}/compatibility/")
    _choose(browser, **selection)
    box = browser.find_element(By.CSS_SELECTOR, "[data-empty]")
    _wait(box.is_displayed, what="the explanation")
    why = data["explanations"][key]
    assert why["reasons"] or why["none"]
    lead = why["reasons"][0] if why["reasons"] else None  # the rule about these choices
    if lead:
        assert lead["rule"] in box.text and lead["example"] in box.text
    assert _expected(data, selection) == []
    assert _count(browser) == "No combination matches this selection."
    command = box.find_element(By.CSS_SELECTOR, "[data-command]").get_attribute("data-command")
    assert command == why["command"]
    nearest = _rows(browser)
    assert nearest, "no nearest rows offered"
    for name in selection:  # each nearest row keeps all but one of the choices
        rest = {k: v for k, v in selection.items() if k != name}
        best = _expected(data, rest)[0]
        assert best in nearest


def test_a_copied_command_is_what_envgen_resolve_gives(browser, site_url):
    from selenium.webdriver.common.by import By

    _open(browser, f"{site_url}/compatibility/?framework=colossalai&python=3.11")
    browser.execute_cdp_cmd("Browser.grantPermissions", {
        "origin": site_url, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]})
    row = browser.find_element(By.CSS_SELECTOR, "[data-rows] tr[data-combination]")
    row.find_element(By.CSS_SELECTOR, "button.envgen-copy").click()
    copied = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "navigator.clipboard.readText().then(done, e => done('ERROR ' + e));")
    assert copied == row.find_element(By.CSS_SELECTOR, "[data-command]") \
        .get_attribute("data-command")
    argv = shlex.split(copied)
    assert argv[:2] == ["envgen", "make"]
    proc = run_envgen("resolve", "--json", *argv[2:])
    assert proc.returncode == 0, proc.stderr
    best = json.loads(proc.stdout)["combinations"][0]
    assert best["id"] == row.get_attribute("data-combination")
    assert copied == make_command(best["framework"], best["framework_version"], best["torch"],
                                  best["cuda"], best["python"], best["os"])


def test_the_copied_command_keeps_the_gpu_and_resolves_to_its_row(browser, site_url):
    """Colossal-AI + V100: the command carries --gpu V100 (the ops are built for sm_70) and,
    run as `envgen resolve --json`, gives the row's combination first."""
    from selenium.webdriver.common.by import By

    _open(browser, f"{site_url}/compatibility/?framework=colossalai&gpu=V100")
    row = browser.find_element(By.CSS_SELECTOR, "[data-rows] tr[data-combination]")
    assert browser.find_element(By.CSS_SELECTOR, "[data-rows] tr td").get_attribute(
        "data-label") == "Tier"  # the evidence is the first thing a row shows
    copied = row.find_element(By.CSS_SELECTOR, "[data-command]").get_attribute("data-command")
    argv = shlex.split(copied)
    assert argv[:2] == ["envgen", "make"] and argv[-2:] == ["--gpu", "V100"]
    proc = run_envgen("resolve", "--json", "--limit", "1", *argv[2:])
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["combinations"][0]["id"] == \
        row.get_attribute("data-combination")


def test_an_edited_link_and_an_empty_choice_lead_with_their_own_reason(browser, site_url):
    from selenium.webdriver.common.by import By

    _open(browser, f"{site_url}/compatibility/?framework=deepspeed&cuda=99.9")
    box = browser.find_element(By.CSS_SELECTOR, "[data-empty]")
    _wait(box.is_displayed, what="the unknown value")
    assert "unknown value: cuda \"99.9\" is not in the data" in box.text
    assert _rows(browser) == [] and "unknown value" in _count(browser)
    _open(browser, f"{site_url}/compatibility/?framework=deepspeed&cuda=12.1&gpu=B200")
    box = browser.find_element(By.CSS_SELECTOR, "[data-empty]")
    _wait(box.is_displayed, what="the explanation")
    lead = box.find_element(By.CSS_SELECTOR, "[data-reason]")
    assert lead.get_attribute("data-reason") == "gpu-arch" and "sm_100" in lead.text
    command = box.find_element(By.CSS_SELECTOR, "[data-command]").get_attribute("data-command")
    assert command == "envgen resolve --framework deepspeed --cuda 12.1 --gpu B200"


def test_a_shared_link_restores_the_selection(browser, site_url):
    from selenium.webdriver.common.by import By

    selection = {"framework": "deepspeed", "cuda": "12.6", "python": "3.12", "gpu": "A100"}
    _open(browser, f"{site_url}/compatibility/")
    _choose(browser, **selection)
    _wait(lambda: "gpu=A100" in browser.current_url, what="the selection in the URL")
    link, rows = browser.current_url, _rows(browser)
    browser.get(f"{site_url}/")
    _open(browser, link)
    for name in FILTERS:
        value = browser.find_element(By.CSS_SELECTOR, f'[data-filter="{name}"]') \
            .get_attribute("value")
        assert value == selection.get(name, "")
    assert _rows(browser) == rows


def _page_overflow(driver) -> int:
    return driver.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth")


def test_desktop_and_phone_width_screenshots_without_sideways_scrolling(browser, site_url,
                                                                         artifacts):
    url = f"{site_url}/compatibility/?framework=deepspeed&cuda=12.1"
    try:
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": False})
        _open(browser, url)
        assert _page_overflow(browser) <= 0
        browser.save_screenshot(str(artifacts / "compatibility-desktop-1280.png"))
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
        for page in (url, f"{site_url}/", f"{site_url}/quickstart/", f"{site_url}/cli/",
                     f"{site_url}/before-you-launch/"):
            if "compatibility" in page:
                _open(browser, page)
            else:
                browser.get(page)
            assert browser.execute_script("return window.innerWidth") == 390
            assert _page_overflow(browser) <= 0, f"{page} scrolls sideways at 390 px"
        _open(browser, url)
        browser.save_screenshot(str(artifacts / "compatibility-phone-390.png"))
        browser.execute_script("document.querySelector('[data-count]').scrollIntoView()")
        time.sleep(0.5)  # the header's title changes on scroll, animated
        browser.save_screenshot(str(artifacts / "compatibility-phone-390-rows.png"))
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    for name in ("compatibility-desktop-1280.png", "compatibility-phone-390.png",
                 "compatibility-phone-390-rows.png"):
        assert (artifacts / name).stat().st_size > 10_000
