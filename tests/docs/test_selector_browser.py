"""The compatibility selector in headless Chromium against its JSON (issue 39 part 3): rows
in the ranking policy's order with their counts, the flavor control (default: what works
without conda, from PyPI and the OS's packages), a copied command that keeps every choice and
resolves to its row, an empty choice that leads with its own reason (raw source lines only
behind "source"), an edited link's unknown value, and a shared link."""

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


def _open(driver, url: str) -> None:
    from selenium.webdriver.common.by import By

    driver.get(url)
    root = driver.find_element(By.ID, "envgen-selector")
    _wait(lambda: root.get_attribute("data-ready") == "true", what="the selector's data")


def _find(driver, css: str):
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, css)


def _choose(driver, **values: str) -> None:
    from selenium.webdriver.support.ui import Select

    for name, value in values.items():
        Select(_find(driver, f'[data-filter="{name}"]')).select_by_value(value)


def _rows(driver) -> list[tuple[str, str, str]]:
    from selenium.webdriver.common.by import By

    return [(r.get_attribute("data-combination"), r.get_attribute("data-tier"),
             r.get_attribute("data-flavor"))
            for r in driver.find_elements(By.CSS_SELECTOR, "[data-rows] tr[data-combination]")]


def _count(driver) -> str:
    return _find(driver, "[data-count]").text


def _expected(data: dict, selection: dict[str, str]) -> list[tuple[str, str, str]]:
    """The rows the page must show for ``selection``, computed here from the JSON: each with
    the first flavor of the choice that makes it (with os-package, on the OS's nvcc's
    GPU architectures)."""
    col = {c: i for i, c in enumerate(COLUMNS)}
    axes = data["axes"]
    arch_of = {g["name"]: g["arch"] for g in data["gpus"]} | {a: a for a in data["archs"]}
    allowed = {c["value"]: c["flavors"] for c in data["flavor_choices"]}[
        selection.get("flavor", "")]
    out = []
    for row in data["rows"]:
        f = {n: axes[n][row[col[n]]] for n in ("framework", "torch", "cuda", "python", "os")}
        f["framework_version"] = axes["framework_version"][row[col["framework_version"]]][1]
        tier = row[col["tier"]]
        if not all(f[n] == v for n, v in selection.items() if n in f):
            continue
        if "tier" in selection and tier < axes["tier"].index(selection["tier"]):
            continue
        flavor = None
        for bit, entry in enumerate(data["flavors"]):
            if entry["flavor"] not in allowed or not row[col["flavors"]] & (1 << bit):
                continue
            if "gpu" in selection:
                s = row[col["os_package_arch_set" if entry["flavor"] == "os-package"
                            else "arch_set"]]
                if s < 0 or arch_of[selection["gpu"]] not in {
                        data["archs"][i] for i in data["arch_sets"][s]}:
                    continue
            flavor = entry["flavor"]
            break
        if flavor:
            cid = (f"{f['framework']}-{f['framework_version']}-torch{f['torch']}-cu"
                   f"{f['cuda'].replace('.', '')}-py{f['python']}-{f['os'].replace('-', '')}"
                   f"-x86_64")
            out.append((cid, axes["tier"][tier], flavor))
    return out


def _resolve_first(argv: list[str]) -> str:
    proc = run_envgen("resolve", "--json", "--limit", "1", *argv)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["combinations"][0]["id"]


def test_every_control_is_labelled_and_the_rows_are_the_default_flavors(browser, site_url,
                                                                        data):
    from selenium.webdriver.common.by import By

    _open(browser, f"{site_url}/compatibility/")
    for name in FILTERS:
        control = _find(browser, f'[data-filter="{name}"]')
        label = _find(browser, f'label[for="{control.get_attribute("id")}"]')
        assert label.text.strip()
        assert control.tag_name == "select"
    expected = _expected(data, {})
    assert {flavor for _, _, flavor in expected} <= {"venv", "os-package"}
    assert len(expected) < len(data["rows"])  # conda's rows are another choice
    assert _rows(browser) == expected[:PAGE]
    assert _count(browser).startswith(f"{len(expected):,} of {len(data['rows']):,}")
    for command in browser.find_elements(By.CSS_SELECTOR, "[data-rows] [data-command]"):
        argv = shlex.split(command.get_attribute("data-command"))
        assert argv[:3] == ["envgen", "make", "--framework"]
        assert argv[argv.index("--flavor") + 1] in ("venv", "os-package")


def test_keyboard_alone_changes_a_filter(browser, site_url, data):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    _open(browser, f"{site_url}/compatibility/")
    control = _find(browser, '[data-filter="framework"]')
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
    {"framework": "deepspeed", "cuda": "12.1", "flavor": "conda"},
    {"framework": "megatron-core", "python": "3.12", "os": "ubuntu-24.04", "gpu": "H100"},
    {"cuda": "12.8", "gpu": "sm_120", "tier": "T1", "flavor": "any"},
    {"os": "ubuntu-24.04", "cuda": "12.8", "flavor": "os-package"},
], ids=["framework-cuda", "conda", "four-filters-gpu-name", "arch-tier-any-flavor",
        "os-package"])
def test_choices_give_the_rows_of_the_json_and_their_count(browser, site_url, data, selection):
    _open(browser, f"{site_url}/compatibility/")
    _choose(browser, **selection)
    expected = _expected(data, selection)
    assert expected, f"the data has no row for {selection}: pick another case"
    _wait(lambda: _rows(browser) == expected[:PAGE], what=f"the rows of {selection}")
    assert _count(browser).startswith(f"{len(expected):,} of {len(data['rows']):,}")
    if len(expected) > PAGE:
        assert f"the best {PAGE} shown" in _count(browser)


def test_show_more_adds_the_next_rows(browser, site_url, data):
    _open(browser, f"{site_url}/compatibility/?framework=deepspeed")
    expected = _expected(data, {"framework": "deepspeed"})
    assert len(expected) > 2 * PAGE
    _find(browser, "[data-more]").click()
    _wait(lambda: _rows(browser) == expected[:2 * PAGE], what="100 rows")


def test_the_flavor_control_defaults_to_no_conda_and_explains_conda(browser, site_url, data):
    from selenium.webdriver.support.ui import Select

    _open(browser, f"{site_url}/compatibility/")
    control = Select(_find(browser, '[data-filter="flavor"]'))
    assert control.first_selected_option.get_attribute("value") == ""
    assert "venv or os-package" in control.first_selected_option.text
    assert [o.get_attribute("value") for o in control.options] == \
        [c["value"] for c in data["flavor_choices"]]
    note = _find(browser, "[data-flavor-note]")
    conda = note.find_element("css selector", '[data-flavor="conda"]').text
    assert "conda-forge" in conda and "--channel" in conda and "not in this choice" in conda
    assert "CUDA 13.0 or newer" in note.text  # venv, from the toolchain's rule
    _choose(browser, flavor="conda")
    _wait(lambda: "flavor=conda" in browser.current_url, what="the flavor in the URL")
    expected = _expected(data, {"flavor": "conda"})
    _wait(lambda: _rows(browser) == expected[:PAGE], what="conda's rows")
    assert {f for _, _, f in _rows(browser)} == {"conda"}
    assert _count(browser).startswith(f"{len(expected):,} of ")
    for command in browser.find_elements("css selector", "[data-rows] [data-command]"):
        assert " --flavor conda" in command.get_attribute("data-command")
    _choose(browser, flavor="")
    _wait(lambda: "flavor=" not in browser.current_url, what="the default out of the URL")


@pytest.mark.parametrize("flavor", ["", "conda"], ids=["default-flavor", "conda"])
def test_the_copied_command_keeps_every_choice_and_resolves_to_its_row(browser, site_url,
                                                                       flavor):
    """Colossal-AI + V100: the command carries --gpu V100 (the ops are built for sm_70), the
    row's release, OS and flavor, and, run as `envgen resolve --json`, gives the row's
    combination first."""
    query = "framework=colossalai&gpu=V100" + (f"&flavor={flavor}" if flavor else "")
    _open(browser, f"{site_url}/compatibility/?{query}")
    row = _find(browser, "[data-rows] tr[data-combination]")
    assert _find(browser, "[data-rows] tr td").get_attribute("data-label") == "Tier"
    copied = row.find_element("css selector", "[data-command]").get_attribute("data-command")
    argv = shlex.split(copied)
    assert argv[:2] == ["envgen", "make"] and argv[-2:] == ["--gpu", "V100"]
    cid = row.get_attribute("data-combination")
    v = {flag: argv[argv.index(flag) + 1] for flag in (
        "--framework", "--framework-version", "--torch", "--cuda", "--python", "--os")}
    assert cid == (f"{v['--framework']}-{v['--framework-version']}-torch{v['--torch']}-cu"
                   f"{v['--cuda'].replace('.', '')}-py{v['--python']}-"
                   f"{v['--os'].replace('-', '')}-x86_64")  # the row's release and OS
    assert argv[argv.index("--flavor") + 1] == row.get_attribute("data-flavor") == \
        (flavor or row.get_attribute("data-flavor"))
    if flavor:
        assert row.get_attribute("data-flavor") == flavor
    assert _resolve_first(argv[2:]) == cid


def test_a_copied_command_is_what_envgen_resolve_gives(browser, site_url):
    _open(browser, f"{site_url}/compatibility/?framework=colossalai&python=3.11")
    browser.execute_cdp_cmd("Browser.grantPermissions", {
        "origin": site_url, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]})
    row = _find(browser, "[data-rows] tr[data-combination]")
    row.find_element("css selector", "button.envgen-copy").click()
    copied = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "navigator.clipboard.readText().then(done, e => done('ERROR ' + e));")
    assert copied == row.find_element("css selector", "[data-command]") \
        .get_attribute("data-command")
    argv = shlex.split(copied)
    assert argv[:2] == ["envgen", "make"]
    proc = run_envgen("resolve", "--json", *argv[2:])
    assert proc.returncode == 0, proc.stderr
    best = json.loads(proc.stdout)["combinations"][0]
    assert best["id"] == row.get_attribute("data-combination")
    assert copied == make_command(best["framework"], best["framework_version"], best["torch"],
                                  best["cuda"], best["python"], best["os"],
                                  row.get_attribute("data-flavor"))


def test_an_empty_choice_says_why_and_offers_the_nearest_rows(browser, site_url, data):
    key = next(k for k in data["explanations"] if k.startswith("framework=") and "&cuda=" in k)
    selection = dict(part.split("=", 1) for part in key.split("&"))
    _open(browser, f"{site_url}/compatibility/")
    _choose(browser, **selection)
    box = _find(browser, "[data-empty]")
    _wait(box.is_displayed, what="the explanation")
    why = data["explanations"][key]
    assert why["reasons"] or why["none"]
    lead = why["reasons"][0] if why["reasons"] else None  # the rule about these choices
    if lead:
        assert lead["rule"] in box.text and lead["example"] in box.text
    assert _expected(data, selection) == [] == _expected(data, {**selection, "flavor": "any"})
    assert _count(browser) == "No combination matches this selection."
    command = box.find_element("css selector", "[data-command]").get_attribute("data-command")
    assert command == why["command"]
    nearest = [cid for cid, _, _ in _rows(browser)]
    assert nearest, "no nearest rows offered"
    for name in selection:  # each nearest row keeps all but one of the choices
        rest = _expected(data, {k: v for k, v in selection.items() if k != name})
        if rest:
            assert rest[0][0] in nearest


def test_deepspeed_cuda_12_1_b200_leads_with_sm_100(browser, site_url):
    _open(browser, f"{site_url}/compatibility/?framework=deepspeed&cuda=12.1&gpu=B200")
    box = _find(browser, "[data-empty]")
    _wait(box.is_displayed, what="the explanation")
    lead = box.find_element("css selector", "[data-reason]")
    assert lead.get_attribute("data-reason") == "gpu-arch" and "sm_100" in lead.text
    assert lead.text.startswith("nvcc 12.1 cannot target sm_100")  # the words first
    command = box.find_element("css selector", "[data-command]").get_attribute("data-command")
    assert command == "envgen resolve --framework deepspeed --cuda 12.1 --gpu B200"


def test_raw_source_lines_are_shown_only_behind_source(browser, site_url, data):
    """A reason quoting a file line (a torch header's #if, the op builder's line) shows its
    words; the quoted line appears only when its "source" disclosure is opened."""
    key, why = next((k, w) for k, w in data["explanations"].items()
                    if any(any("#if" in s for s in r["source"]) for r in w["reasons"]))
    quoted = next(r for r in why["reasons"] if any("#if" in s for s in r["source"]))
    line = next(s for s in quoted["source"] if "#if" in s)
    selection = dict(part.split("=", 1) for part in key.split("&"))
    _open(browser, f"{site_url}/compatibility/")
    _choose(browser, **selection)
    box = _find(browser, "[data-empty]")
    _wait(box.is_displayed, what="the explanation")
    assert "#if" not in box.text and line not in box.text
    for other in box.find_elements("css selector", "details.envgen-other > summary"):
        other.click()  # the other rules: their words, still not the source
    item = next(li for li in box.find_elements("css selector", f'[data-reason="{quoted["rule"]}"]')
                if quoted["example"] in li.text)
    assert item.text.startswith(quoted["example"]) and "#if" not in box.text
    item.find_element("css selector", "details.envgen-source > summary").click()
    _wait(lambda: line in item.text, what="the source line once opened")


def test_an_empty_flavor_choice_leads_with_the_flavor_and_offers_the_others(browser, site_url,
                                                                            data):
    _open(browser, f"{site_url}/compatibility/?cuda=12.1&flavor=venv")
    box = _find(browser, "[data-empty]")
    _wait(box.is_displayed, what="the explanation")
    lead = box.find_element("css selector", "[data-reason]")
    assert lead.get_attribute("data-reason") == "flavor"
    assert "venv builds with CUDA 13.0 or newer" in lead.text
    assert "https://" not in lead.text  # the toolchain rule's citation: behind "source"
    assert _expected(data, {"cuda": "12.1", "flavor": "venv"}) == []
    conda = _expected(data, {"cuda": "12.1", "flavor": "conda"})
    button = box.find_element("css selector", '[data-flavor-switch="conda"]')
    assert f"Show the {len(conda):,} rows conda makes" == button.text
    button.click()
    _wait(lambda: "flavor=conda" in browser.current_url, what="the conda choice")
    assert _rows(browser) == conda[:PAGE]
    assert _count(browser).startswith(f"{len(conda):,} of ")


def test_with_os_package_the_gpu_is_judged_with_the_oss_nvcc(browser, site_url, data):
    """Ubuntu 24.04 ships CUDA 12.0's nvcc, which cannot target sm_100: with os-package a B200
    leaves no row there, though conda (CUDA 12.8's nvcc) makes them."""
    base = {"os": "ubuntu-24.04", "cuda": "12.8", "gpu": "B200"}
    assert _expected(data, {**base, "flavor": "conda"})
    assert _expected(data, {**base, "flavor": "os-package"}) == []
    assert _expected(data, {"os": "ubuntu-24.04", "cuda": "12.8", "flavor": "os-package"})
    _open(browser, f"{site_url}/compatibility/?os=ubuntu-24.04&cuda=12.8&gpu=B200"
          "&flavor=os-package")
    box = _find(browser, "[data-empty]")
    _wait(box.is_displayed, what="the explanation")
    lead = box.find_element("css selector", "[data-reason]")
    assert lead.get_attribute("data-reason") == "flavor"
    assert "cannot target B200 (sm_100)" in lead.text and "ubuntu-24.04 12.0" in lead.text


def test_an_edited_link_reports_an_unknown_value(browser, site_url):
    for query, name, value in (("framework=deepspeed&cuda=99.9", "cuda", "99.9"),
                               ("framework=deepspeed&flavor=pip", "flavor", "pip")):
        _open(browser, f"{site_url}/compatibility/?{query}")
        box = _find(browser, "[data-empty]")
        _wait(box.is_displayed, what="the unknown value")
        assert f'unknown value: {name} "{value}" is not in the data' in box.text
        assert _rows(browser) == [] and "unknown value" in _count(browser)


def test_a_shared_link_restores_the_selection(browser, site_url):
    selection = {"framework": "deepspeed", "cuda": "12.6", "python": "3.12", "gpu": "A100",
                 "flavor": "conda"}
    _open(browser, f"{site_url}/compatibility/")
    _choose(browser, **selection)
    _wait(lambda: "gpu=A100" in browser.current_url and "flavor=conda" in browser.current_url,
          what="the selection in the URL")
    link, rows = browser.current_url, _rows(browser)
    assert rows
    browser.get(f"{site_url}/")
    _open(browser, link)
    for name in FILTERS:
        value = _find(browser, f'[data-filter="{name}"]').get_attribute("value")
        assert value == selection.get(name, "")
    assert _rows(browser) == rows


def test_the_flavor_note_and_opened_sources_fit_a_phone(browser, site_url, data, artifacts):
    """At 390 px, the flavor note with every flavor's sources open and an explanation with its
    quoted source line open scroll no page sideways."""
    key = next(k for k, w in data["explanations"].items()
               if any(any("#if" in s for s in r["source"]) for r in w["reasons"]))
    try:
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
        _open(browser, f"{site_url}/compatibility/?{key}")
        box = _find(browser, "[data-empty]")
        _wait(box.is_displayed, what="the explanation")
        browser.execute_script(
            "document.querySelectorAll('#envgen-selector details').forEach(d => d.open = true)")
        assert box.find_elements("css selector", "details.envgen-source[open]")
        assert browser.execute_script("return window.innerWidth") == 390
        assert browser.execute_script("return document.documentElement.scrollWidth - "
                                      "document.documentElement.clientWidth") <= 0
        browser.save_screenshot(str(artifacts / "compatibility-phone-390-sources.png"))
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
