"""The pipeline's last step: a normalised spec and its resolved overrides as the bundle's files.

Pure: overrides in, bytes out (:func:`assemble`); the bundle's format is
:mod:`tutorrl.compiler.bundle`'s, its templates ``templates/*.tmpl``.
"""

from __future__ import annotations

import functools

import msgspec

from tutorrl import _toml
from tutorrl.compiler.bundle import CompiledBundle
from tutorrl.compiler.bundle.templates import render_template
from tutorrl.compiler.bundle.manifest import seal
from tutorrl.compiler.pipeline import roots
from tutorrl.compiler.pipeline.resolve import Resolved
from tutorrl.compiler.release import Lock
from tutorrl.compiler.release.spelling import launch_program
from tutorrl.compiler.spec import Spec, to_builtins
from tutorrl.contract import EVIDENCE_ON_FAILURE_ENV
from tutorrl.errors import Problem


# shlex.quote's own rule without shlex, whose import and the pattern it compiles
# are a share of every cold compile; tests/compiler/pipeline/test_launch_script.py
# holds the two to the same words.
_SHELL_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-")


def _quote(text: str) -> str:
    """``text`` as one shell word, as ``shlex.quote`` writes it."""
    if not text:
        return "''"
    if _SHELL_SAFE.issuperset(text):
        return text
    return "'" + text.replace("'", "'\"'\"'") + "'"


def assemble(spec: Spec, resolved: Resolved, lock: Lock, *, warnings: tuple[Problem, ...] = ()) -> CompiledBundle:
    """Every file of the bundle for a normalised spec and its resolved overrides."""
    experiment = spec.experiment.name or "unnamed"
    worker_env = dict(spec.env.set)
    if spec.evidence.on_failure == "stop":
        # Read by tutorrl.evidence.callback in verl's trainer actor; unset means "record",
        # so bundles that do not ask for "stop" are unchanged.
        worker_env[EVIDENCE_ON_FAILURE_ENV] = "stop"
    worker_env = dict(sorted(worker_env.items()))
    spec_toml = render_spec_toml(spec, lock).encode()
    # Overrides whose value launch.sh computes (the reward module's file before
    # verl 0.7.1), each held in a shell variable.
    runtime_vars = {i: f"reward_module_file_{n}" if n else "reward_module_file"
                    for n, i in enumerate(i for i, o in enumerate(resolved.overrides) if o.runtime)}
    # Overrides whose value starts with a root: launch.sh puts the job's value in.
    rooted = [i for i, o in enumerate(resolved.overrides)
              if spec.roots and not o.runtime and o.raw is None and roots.references(o.value)
              and any(name in spec.roots for name, _ in roots.references(o.value))]
    root_vars = {i: f"rooted_{n}" for n, i in enumerate(rooted)}
    runtime_vars.update(root_vars)
    entry = entry_point(lock)
    config_args = _quote("--config-name") + " " + _quote(resolved.config_name)
    if resolved.config_path is not None:
        config_args = f"--config-path {_quote(resolved.config_path)} {config_args}"
    elif entry.trainer_config:
        config_args = f'--config-path "$verl_trainer_config" {config_args}'
    module_files = [(runtime_vars[i], _quote(o.spelled), _quote(str(o.value)))
                    for i, o in enumerate(resolved.overrides) if o.runtime]
    # The entry's Hydra search path is an override, so it comes after "$@" (`--cfg job`) with the
    # others: Hydra's argparse takes no option after its first override.
    lines = [_quote(a) for a in entry.hydra_args()] + [
        f'"${runtime_vars[i]}"' if i in runtime_vars else _quote(o.text) for i, o in enumerate(resolved.overrides)]
    launch = render_template(
        "launch.sh.tmpl",
        experiment=experiment, verl=lock.release, variant=lock.variant, module=entry.module,
        config_args=config_args,
        passthrough_checks="".join(
            f'\n: "${{{name}:?is passed through from the submitter but is not set in the job environment}}"'
            for name in spec.env.passthrough) + "\n",
        evidence_check=render_template("evidence_check.tmpl") if any(
            o.setting == "trainer.evidence_callback" for o in resolved.overrides) else "",
        module_files=(render_template("module_files.tmpl", verl=lock.release,
                                      module_program=_quote(launch_program(lock.release)))
                      if module_files else "") + "".join(
            f'\n{var}="$("$python_bin" -c "$module_program" {key} {module})" || exit 3'
            for var, key, module in module_files) + _root_lines(spec, resolved, root_vars)
        + (render_template("trainer_config.tmpl", module=entry.module)
           if entry.trainer_config and resolved.config_path is None else ""),
        roots=_root_checks(spec),
        recipe=_recipe_lines(spec, entry),
        overrides=" \\" + " \\".join(f"\n  {line}" for line in lines) if lines else "",
    ).encode()
    env_file = render_template(
        "bundle.env.tmpl",
        experiment=experiment,
        exports="".join(f"\nexport {name}={_quote(value)}" for name, value in worker_env.items()),
        passthrough=("\n# Passed through from the submitter's environment at run time; values are never written:"
                     + "".join(f"\n#   {name}" for name in spec.env.passthrough)) if spec.env.passthrough else "",
    ).encode()
    job = {
        # Relative to the bundle folder: the runtime runs it there, or ships
        # the folder as the job's working_dir.
        "entrypoint": "bash launch.sh",
        "runtime_env": {"env_vars": worker_env},
        "metadata": {
            "tutorrl_experiment": experiment,
            "tutorrl_project": spec.experiment.project or "",
            "tutorrl_verl": lock.release,
            "tutorrl_passthrough": ",".join(spec.env.passthrough),
            # Another entry point than main_ppo (a main_ppo bundle's job is what it always was).
            **({} if entry.default else {"tutorrl_entry": entry.name}),
        },
        # The driver only orchestrates: verl's own actors must get the GPUs,
        # and anything reserved for the entrypoint is taken from them.
        "entrypoint_num_cpus": 1,
        "entrypoint_num_gpus": 0,
    }
    plugin = ""
    if spec.reward.plugin is not None:
        from tutorrl.compiler.spec import load_plugin

        plugin = f"{spec.reward.plugin} {load_plugin(spec.reward.plugin).version}"
    files = {"bundle.env": env_file, "launch.sh": launch, "spec.toml": spec_toml}
    compiled = seal(files, job, experiment=experiment, verl=lock.release, variant=lock.variant,
                     keymap_digest=lock.digest(), reward_plugin=plugin, entry="" if entry.default else entry.name)
    return msgspec.structs.replace(compiled, warnings=warnings)


def entry_point(lock: Lock):
    """The entry point a lock is cut for (keymap/entries.toml): the module launch.sh starts."""
    from tutorrl.compiler.release import find_entry

    return find_entry(lock.entry)


def _recipe_lines(spec: Spec, entry) -> str:
    """A recipe's code: its folder re-hashed against the pinned digest, then its import root on PYTHONPATH: the
    folder above it where the folder is the module's top package, else the folder itself (``entry.import_root``)."""
    recipe = spec.experiment.recipe
    if recipe is None:
        return ""
    from tutorrl.compiler.pipeline.recipe_code import launch_program as recipe_program

    ref = roots.reference(recipe.path)
    where = (f'"${{{ref[0]}}}"{_quote(ref[1]) if ref[1] else ""}' if ref and ref[0] in spec.roots
             else _quote(recipe.path))
    import_root = '"$recipe_dir/.."' if entry.checkout_is_package else '"$recipe_dir"'
    return ("\n# The recipe's code (the spec's [experiment.recipe]): the files it was compiled with, or no start.\n"
            f"recipe_dir={where}\n"
            f'"$python_bin" -c {_quote(recipe_program())} "$recipe_dir" {recipe.digest} || exit 3\n'
            f'export PYTHONPATH="$(cd {import_root} && pwd)${{PYTHONPATH:+:$PYTHONPATH}}"')


def _root_checks(spec: Spec) -> str:
    """Each root takes the job's value, else the spec's default, else stops the launch."""
    if not spec.roots:
        return ""
    lines = ["# Roots (the spec's [roots]): folders named by the job's environment."]
    for name, root in sorted(spec.roots.items()):
        if root.default is not None:
            lines.append(f'if [ -z "${{{name}:-}}" ]; then export {name}={_quote(root.default)}; fi')
        else:
            lines.append(f': "${{{name}:?is a root of this bundle ([roots] in its spec) and is not set in the job environment}}"')
    return "\n".join(lines) + "\n"


def _root_lines(spec: Spec, resolved: Resolved, root_vars: dict[int, str]) -> str:
    if not root_vars:
        return ""
    out = [render_template("roots_program.tmpl", roots_program=_quote(roots.launch_program()))]
    for i, var in root_vars.items():
        o = resolved.overrides[i]
        key = _quote(o.spelled)
        out.append(f'\n{var}="$("$python_bin" -c "$roots_program" {key} {_quote(roots.launch_argument(o.value))})" || exit 3')
    return "".join(out)


def render_spec_toml(spec: Spec, lock: Lock) -> str:
    """The normalised spec, then verl's default for every setting it leaves unset."""
    from tutorrl.compiler.spec.flat import NOT_SETTINGS

    out = ["# The normalised spec this bundle was compiled from.\n", _toml.dumps(to_builtins(spec))]
    unset = tuple(s for s in _unset_settings(spec) if s not in NOT_SETTINGS)
    # The defaults follow from the release and which settings are unset alone: a
    # sweep's points (the same settings set, other values) write them once.
    # Keyed by the lock object itself (load_lock hands out one per release), held
    # in the entry so its id names no other lock while the entry lives.
    key = (id(lock), unset)
    held = _DEFAULTS.get(key)
    if held is None or held[0] is not lock:
        held = _DEFAULTS[key] = (lock, _defaults_text(unset, lock))
        if len(_DEFAULTS) > 64:
            _DEFAULTS.pop(next(iter(_DEFAULTS)))
    out.append(held[1])
    return "".join(out)


_DEFAULTS: dict[tuple, tuple[Lock, str]] = {}


def _defaults_text(unset: tuple[str, ...], lock: Lock) -> str:
    out = []
    stated = []  # (setting, value, how)
    for setting in unset:
        target = lock.targets.get(setting)
        if target is None or target.kind == "table":
            continue
        if target.interpolation:
            stated.append((setting, target.interpolation, "  (follows another setting)"))
        elif target.default is None:
            stated.append((setting, None, ""))
        else:
            stated.append((setting, target.default, ""))
    literals = iter(_toml_values([value for _, value, _ in stated if value is not None]))
    defaults = [f"# {setting}: unset (no default)" if value is None else f"# {setting} = {next(literals)}{how}"
                for setting, value, how in stated]
    if defaults:
        out.append(f"\n# Not set here, so verl {lock.release}'s own defaults apply ({lock.variant}):\n")
        out.append("\n".join(defaults) + "\n")
    return "".join(out)


def _unset_settings(spec: Spec) -> list[str]:
    """The settings of :func:`spec_settings` that ``spec`` leaves ``None``, in the same
    order: one walk of the struct instead of a dotted lookup per setting (215 of
    them; in a 100-point sweep that lookup was a fifth of the compile)."""
    out: list[str] = []
    _collect_unset(spec, Spec, "", out)
    return out


def _collect_unset(value, cls, prefix: str, out: list[str]) -> None:
    # A section left unset (None) leaves every setting under it unset, as
    # get_field reads it.
    for name, sub in _fields(cls):
        field = None if value is None else getattr(value, name)
        if sub is not None:
            _collect_unset(field, sub, prefix + name + ".", out)
        elif field is None:
            out.append(prefix + name)


@functools.cache
def _fields(cls) -> tuple[tuple[str, type | None], ...]:
    from tutorrl.compiler.spec.load import struct_in

    return tuple((name, struct_in(cls.__annotations__[name])) for name in cls.__struct_fields__)


def _toml_values(values: list) -> list[str]:
    """Each value on one line (a comment cannot span lines), its scalars written
    by TOML's writer in one call for all (not one call each: each call has a fixed cost)."""
    scalars: list = []

    def collect(value) -> None:
        if isinstance(value, list):
            for v in value:
                collect(v)
        elif isinstance(value, dict):
            for v in value.values():
                collect(v)
        else:
            scalars.append(value)

    for value in values:
        collect(value)
    # Without multi-line strings every scalar is one line: "s<i> = <literal>".
    # (Split at "\n" only: a string may hold U+0085 or U+2028, which TOML
    # writes as they are and splitlines() would break at.)
    lines = _toml.dumps({f"s{i}": v for i, v in enumerate(scalars)}).split("\n")[:-1]
    literals = iter(line.split(" = ", 1)[1] for line in lines)

    def write(value) -> str:
        if isinstance(value, list):
            return "[" + ", ".join(write(v) for v in value) + "]"
        if isinstance(value, dict):
            return "{ " + ", ".join(f"{k} = {write(v)}" for k, v in value.items()) + " }"
        return next(literals)

    return [write(value) for value in values]


def spec_settings() -> list[str]:
    """Every setting name the spec can express, in declaration order."""
    return _spec_settings(Spec)


@functools.cache
def _spec_settings(cls, prefix: str = "") -> list[str]:
    # The annotations are evaluated objects (spec/structs.py does not defer them),
    # so reading them needs no typing.get_type_hints, which every compile would pay.
    from tutorrl.compiler.spec.load import struct_in

    out = []
    for name in cls.__struct_fields__:
        sub = struct_in(cls.__annotations__[name])
        out += _spec_settings(sub, prefix + name + ".") if sub is not None else [prefix + name]
    return out
