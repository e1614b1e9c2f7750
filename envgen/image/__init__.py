"""Docker images from locks: render the Dockerfile (``render``), name it (``naming``), build,
tag and push it (``build``). Recipes are data: matrix/curated/images.toml."""

from __future__ import annotations

from envgen.image.recipes import Recipes, load_recipes
from envgen.image.render import ImageInput, ImageOptions, render_image

__all__ = ["ImageOptions", "Recipes", "load_recipes", "render_for_lock"]


def render_for_lock(solved, facts, recipes: Recipes, lock_hash: str
                    ) -> tuple[dict[str, str], dict]:
    """The image files and manifest section for a solved lock (envgen.lock.files.Solved)."""
    from envgen.lock.files import pip_options, regenerate_command

    plan, combo = solved.plan, solved.plan.combination
    toolkit = facts.toolkits.get(combo.nvcc)
    inp = ImageInput(
        combination=combo, os_family=facts.oses[combo.os].family, flavor=plan.flavor,
        gcc=plan.gcc, pip=solved.pip, pip_options=tuple(pip_options(plan)),
        conda=solved.conda, lock_hash=lock_hash, nvcc=solved.nvcc,
        regenerate=regenerate_command(plan, solved.options),
        os_toolkit=plan.os_toolkit,
        os_packages=plan.os_packages if plan.flavor == "os-package" else (),
        cuda_home=plan.env.get("CUDA_HOME") if plan.flavor == "os-package" else None)
    return render_image(inp, recipes, solved.options.image,
                        supported_archs=tuple(toolkit.archs) if toolkit else ())
