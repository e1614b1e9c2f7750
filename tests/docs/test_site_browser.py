"""The docs site in headless Chromium: every page loads without console errors, and the
compatibility page at desktop and phone width (390 px) scrolls no page sideways — with
screenshots. The selector itself: tests/docs/test_selector_browser.py."""

from __future__ import annotations

import time

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.browser]


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
