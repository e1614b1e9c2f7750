"""The docs site's compatibility selector in headless Chromium: how long the data takes to
write, how big it is, how long the page takes to be usable, and how long the rows take to
update after a choice.

    python benchmarks/bench_selector.py [--repeat 7]

Builds the site (`mkdocs build` of this checkout into a temporary folder, after
`envgen table --write` into a temporary copy of the selector data), serves it on 127.0.0.1 and
drives Debian's chromium with Selenium (`bash tests/support/browser-up.sh` installs both).
Prints medians: `envgen table --write` (process start included), the JSON's size, page load to
"ready" (the data fetched and parsed, the first rows shown) and one update after a choice
(four filters set and cleared in turn, the script's own `performance.now()` around the update).
Targets: ready ≤ 1 s and an update ≤ 100 ms (a choice feels instant).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage")
UPDATE = """
const s = document.getElementById('envgen-selector').selector, c = s.controls, out = [];
const choices = [['framework', 'deepspeed'], ['cuda', '12.1'], ['python', '3.11'],
                 ['gpu', 'H100'], ['framework', ''], ['cuda', ''], ['python', ''], ['gpu', '']];
for (let k = 0; k < arguments[0]; k++) for (const [n, v] of choices) {
  c[n].value = v; const t = performance.now(); s.update(true); out.push(performance.now() - t);
}
return out;"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "selector.json"
        (Path(tmp) / "README.md").write_text(
            "<!-- envgen:table:start -->\n<!-- envgen:table:end -->\n")
        writes = []
        for _ in range(3):  # all four files are written each time: a new folder's are new
            for old in ("page.md", "table.json", "selector.json"):
                (Path(tmp) / old).unlink(missing_ok=True)
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "envgen", "table", "--write", "--page",
                            f"{tmp}/page.md", "--data-file", f"{tmp}/table.json",
                            "--selector-file", str(data), "--readme", f"{tmp}/README.md"],
                           cwd=REPO, check=True, capture_output=True)
            writes.append(time.perf_counter() - t)
        size = data.stat().st_size
        site = Path(tmp) / "site"
        subprocess.run([sys.executable, "-m", "mkdocs", "build", "-q", "--config-file",
                        str(REPO / "mkdocs.yml"), "--site-dir", str(site)], check=True,
                       env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
        handler = functools.partial(_Quiet, directory=str(site))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for flag in FLAGS:
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        try:
            loads = []
            for _ in range(args.repeat):
                t = time.perf_counter()
                driver.get(f"http://127.0.0.1:{server.server_address[1]}/compatibility/")
                root = driver.find_element(By.ID, "envgen-selector")
                while root.get_attribute("data-ready") != "true":
                    time.sleep(0.005)
                loads.append(time.perf_counter() - t)
            updates = driver.execute_script(UPDATE, args.repeat)
        finally:
            driver.quit()
            server.shutdown()
    ready, update = statistics.median(loads), statistics.median(updates)
    print(f"envgen table --write (4 files)   median {statistics.median(writes):6.2f} s")
    print(f"selector.json                    {size / 1e6:6.2f} MB")
    print(f"page load to ready               median {ready * 1000:6.0f} ms  "
          f"(target <= 1000 ms: {ready / 1.0:.2f}x of it)")
    print(f"update after a choice            median {update:6.1f} ms  max {max(updates):.1f} ms "
          f"(target <= 100 ms: {update / 100:.2f}x of it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
