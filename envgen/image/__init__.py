"""The image stage: a lock → a Docker image with the framework's ops compiled.

Input: a solved lock (envgen.lock) and the recipes of matrix/curated/images.toml (read by
envgen.facts). Output: the Dockerfile and image/ files beside the lock (``render``), the
image's name (``naming``), and the built, tagged, pushed image (``build``, through an engine of
``engines``). Depends on the lock stage, never the reverse.
"""

from __future__ import annotations

from collections.abc import Callable

from envgen.facts.images import Recipes, load_recipes
from envgen.image.render import ImageInput, ImageOptions, render_image

__all__ = ["ImageOptions", "Recipes", "load_recipes", "lock_with_image", "render_for_lock"]


def lock_with_image(facts, combo, options, sources: dict[str, str], recipes: Recipes | None,
                    progress: Callable[[str], None] = lambda _m: None):
    """Solve and render the lock of ``combo`` (envgen.lock); with ``options.image`` also the
    Dockerfile and image/ files from ``recipes``, recorded in the manifest. Nothing is
    written. Returns envgen.lock.LockResult."""
    from envgen.lock import finish, lock_hash, solve

    solved = solve(facts, combo, options, sources, progress)
    image = None
    if options.image is not None:
        if recipes is None:
            raise ValueError("an image needs the recipes of curated/images.toml")
        image = render_for_lock(solved, facts, recipes, lock_hash(solved))
    return finish(solved, image)


def ops_skipped(combo, build) -> tuple[tuple[str, str | None, str], ...]:
    """(op, its build variable, why) for each op the combination says cannot build here
    (``Combination.ops_unavailable``: "name: why")."""
    by_name = {op.name: op for op in (build.ops if build is not None else ())}
    out = []
    for line in combo.ops_unavailable:
        name, _, why = line.partition(": ")
        op = by_name.get(name)
        out.append((name, op.build_var if op is not None else None, why))
    return tuple(out)


def render_for_lock(solved, facts, recipes: Recipes, lock_hash: str
                    ) -> tuple[dict[str, str], dict]:
    """The image files and manifest section for a solved lock (envgen.lock.files.Solved)."""
    from envgen.lock.files import pip_options, regenerate_command

    plan, combo = solved.plan, solved.plan.combination
    toolkit = facts.toolkits.get(combo.nvcc)
    release = next((r for r in facts.frameworks if r.framework == combo.framework
                    and r.version == combo.framework_version), None)
    build = release.build if release is not None else None
    inp = ImageInput(
        combination=combo, os_family=facts.oses[combo.os].family, flavor=plan.flavor,
        gcc=plan.gcc, pip=solved.pip, pip_options=tuple(pip_options(plan)),
        conda=solved.conda, lock_hash=lock_hash, nvcc=solved.nvcc,
        regenerate=regenerate_command(plan, solved.options),
        os_toolkit=plan.os_toolkit,
        os_packages=plan.os_packages if plan.os_toolkit else (),
        cuda_home=plan.env.get("CUDA_HOME") if plan.os_toolkit else None,
        build=solved.build.packages if solved.build else (),
        framework_build=build, ops_skipped=ops_skipped(combo, build))
    return render_image(inp, recipes, solved.options.image,
                        supported_archs=tuple(toolkit.archs) if toolkit else ())
