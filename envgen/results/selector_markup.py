"""The compatibility selector's HTML on the docs page (docs/compatibility.md, written by
``envgen table --write``): one raw HTML block the page's script (docs/js/selector.js) fills
from docs/selector.json. Its attributes are the page's stable markup for scripts and tests:
``data-filter`` on each control, and the script adds ``data-combination``, ``data-tier`` and
``data-command`` to the rows."""

from __future__ import annotations

_SELECTOR_LABELS = {"framework": "Framework", "framework_version": "Release", "cuda": "CUDA",
                    "torch": "PyTorch", "python": "Python", "os": "OS",
                    "gpu": "GPU (name or arch)", "flavor": "Flavor",
                    "tier": "Evidence at least"}
# the flavor control's default: what works without conda (envgen.results.selector NO_CONDA)
DEFAULT_FLAVOR_LABEL = "PyPI + OS packages (venv or os-package)"
_FIRST_OPTION = {"flavor": DEFAULT_FLAVOR_LABEL}
SELECTOR_DATA = "selector.json"  # docs/selector.json, next to the page


def selector_markup() -> list[str]:
    """The selector's HTML (one raw block, no blank line inside): a labelled control per
    filter (``data-filter``), what the chosen flavor installs, the count, the explanation box
    and the rows' table; the page's
    script (docs/js/selector.js) fills them from docs/selector.json."""
    lines = [f'<div id="envgen-selector" class="envgen-selector" data-src="{SELECTOR_DATA}">',
             '<div class="envgen-controls" role="group" aria-label="Choose a combination">']
    for name, label in _SELECTOR_LABELS.items():
        lines.append(f'<div class="envgen-control"><label for="envgen-{name}">{label}</label>'
                     f'<select id="envgen-{name}" name="{name}" data-filter="{name}">'
                     f'<option value="">{_FIRST_OPTION.get(name, "any")}</option></select></div>')
    lines += [
        '<div class="envgen-control"><button type="button" data-reset>Clear all</button></div>',
        "</div>",
        '<div class="envgen-flavor" data-flavor-note></div>',
        '<p class="envgen-count" data-count role="status" aria-live="polite">The selector '
        "needs JavaScript; the rows with evidence are listed below.</p>",
        '<p class="envgen-subset" data-subset></p>',
        '<div class="envgen-empty" data-empty hidden></div>',
        '<div class="envgen-scroll" tabindex="0" role="region" aria-label="Matching '
        'combinations"><table class="envgen-rows"><thead><tr>'
        + "".join(f'<th scope="col">{h}</th>' for h in
                  ("Tier", "Framework", "torch", "CUDA", "Python", "OS", "Evidence",
                   "Commands"))
        + "</tr></thead><tbody data-rows></tbody></table></div>",
        '<button type="button" data-more hidden>Show more</button>',
        "</div>",
    ]
    return lines
