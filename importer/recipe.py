"""A recipe entry's launch (DAPO, entropy) for the import: where its code and config are.

A recipe is outside verl's wheel: its Hydra config sits beside its module in a
verl-recipe checkout, so the round trip composes it from the checkout the user
names (``tutorrl import --recipe PATH``), and the spec names that checkout in
``[experiment.recipe]`` (pinned at compile, as a spec author writes it).
"""

from __future__ import annotations

import os

from tutorrl.errors import RefusedError


def module_dir_of(entry) -> str:
    """The entry module's folder, as Hydra resolves a relative ``--config-path`` against it: inside the
    wheel for verl's own (``verl/experimental/...``), inside the recipe checkout for a recipe (its top
    package is the checkout itself: ``recipe.dapo.main_dapo`` -> ``dapo``)."""
    parts = entry.module.split(".")[:-1]
    return "/".join(parts[1:] if entry.source == "recipe" else parts)


def recipe_folder(entry_name: str, given: str | None, source: str) -> str:
    """The absolute checkout a recipe entry's launch composes from; "" for an entry in verl's wheel.
    Refused, naming the module and what to give, without one, or with a folder that cannot be it."""
    from tutorrl.compiler.release import find_entry

    entry = find_entry(entry_name)
    if entry is None or entry.source != "recipe":
        return ""
    top = entry.module.split(".")[0]
    where = f"a checkout of {entry.repository}" + (f" at {entry.commit[:12]}" if entry.commit else "")
    if not given:
        raise RefusedError(f"{source}: the launch starts {entry.module} (the recipe entry point '{entry.name}'), "
                           f"whose code and Hydra config are outside verl's wheel: give --recipe PATH, {where} "
                           f"named {top!r}")
    folder = os.path.abspath(given)
    config = os.path.join(folder, entry.config_dir)
    if os.path.basename(os.path.normpath(folder)) != top:
        raise RefusedError(f"--recipe {given}: {entry.module} is imported from a folder named {top!r} (launch.sh puts "
                           f"the folder above it on PYTHONPATH); clone or link {where} as .../{top}")
    if entry.trainer_config:
        # Its config is verl's own trainer config (the release's): the checkout has its module only.
        module = entry.module.split(".", 1)[1].replace(".", "/") + ".py"
        missing = [] if os.path.isfile(os.path.join(folder, module)) else [module]
    else:
        missing = [f"{entry.config_dir}/{entry.config_name(v)}.yaml" for v in entry.variants
                   if not os.path.isfile(os.path.join(config, f"{entry.config_name(v)}.yaml"))]
    if missing:
        raise RefusedError(f"--recipe {given}: no {', '.join(missing)} there ({entry.name}'s "
                           f"{'module' if entry.trainer_config else 'config'}); "
                           f"give {where}")
    return folder
