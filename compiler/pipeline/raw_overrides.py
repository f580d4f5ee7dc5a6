"""The one screen every raw override (``[verl] extra_overrides``, ``unread_overrides``) passes first.

A raw override is text the spec hands to Hydra as written, so what it can
reach is what Hydra and verl do with it, not what its key looks like. Three
things are refused here, before the release's key set is asked anything:

* **Hydra's own config.** A key, a config group or a group's *package*
  (``+actor@hydra.job.env_set=dp_actor``) at or under ``hydra`` configures
  Hydra before verl runs: where the job runs, callbacks it instantiates, its
  search path. So is a group placed at the config's root (``@_global_``),
  which may carry a ``hydra`` node. A key naming a package is read by
  Hydra's own override parser where Hydra is installed (it is imported only
  then: a spec without such a key never pays for it); the key grammar it
  applies is ``GROUP@PACKAGE``, the same split made without it.
* **Ray's ``runtime_env``.** verl hands ``ray_kwargs.ray_init`` to
  ``ray.init`` whole, and every ``runtime_env`` key but ``env_vars``
  (``working_dir``, ``py_modules``, ``pip``, ``py_executable``,
  ``worker_process_setup_hook``, ``image_uri``, ...) runs or installs code in
  every worker of the job. Each is refused unless ``[verl] allow_runtime_env``
  names it: then it is part of the spec, hashed into the bundle and shown by
  ``tutorrl diff``. ``env_vars`` is held to ``[env] set``'s name rules
  (rules.py). A whole table above them would carry keys nobody sees.
* **Keys that make every worker import code** (:data:`WORKER_CODE`:
  ``checkpoint_engine.custom_backend_module``): verl imports the module the
  value names in each worker it concerns, so the job runs code the spec does
  not show. Refused unless ``[verl] allow_worker_code`` names the key, as
  ``allow_runtime_env`` does for Ray's.
* **Resolver interpolations** (``${oc.env:HF_TOKEN}``, ``${oc.decode:...}``,
  any ``${name:...}``): verl resolves them when the job runs, on the
  launching environment, into its config, its log and the Jobs API -- a way
  around ``env.set``'s refusal of secrets and of the names that take the
  launch over. Only a plain ``${a.b}`` (a key of verl's config) passes.
"""

from __future__ import annotations

import re

# The one reading of an override's prefix, key and value (resolve.py and rules.py read it from here).
OVERRIDE = re.compile(r"^(~|\+\+|\+)?([A-Za-z_][A-Za-z0-9_.\-/@]*)(?:=(.*))?\Z", re.DOTALL)

RUNTIME_ENV = "runtime_env"
WORKER_ENV = "env_vars"
# What verl hands to ray.init (verl/trainer/main_ppo.py, run_ppo; before 0.6.0 the key was ray_init).
RAY_INIT = ("ray_kwargs.ray_init", "ray_init")
_ABOVE_RAY_INIT = frozenset({"ray_kwargs", "ray_kwargs.ray_init", "ray_init"})
# A plain node interpolation: ${a.b}, ${.sibling}, ${a[0]}. Anything else after '${' is a resolver or worse.
# Compiled by re's cache at the first '${': most raw overrides have none.
_NODE = r"\s*\.*[A-Za-z_][\w\-]*(?:\.[\w\-]+|\[[\w\-]*\])*\s*\}"

Problem = tuple[str, "str | None"]

# Keys whose value names code verl imports in its workers (the key as the release's config spells it, matched at
# the end of an override's key), and which workers. A spec opts in with [verl] allow_worker_code = [that key].
WORKER_CODE = {
    "checkpoint_engine.custom_backend_module": "every worker that syncs weights (the actor's and the rollout's) "
                                               "imports the module it names",
}


def screen_override(text: str, allow_runtime_env=frozenset()) -> Problem | None:
    """Why raw override ``text`` is refused whatever the release (message, hint), or None.

    ``allow_runtime_env``: what the spec allows on purpose: the ``runtime_env`` keys its ``[verl]
    allow_runtime_env`` names and the :data:`WORKER_CODE` keys its ``[verl] allow_worker_code`` names.
    """
    match = OVERRIDE.match(text)
    if not match:
        return None  # not an override at all: check_extra says so in its words
    prefix, key, value = match.groups()
    value = value or ""
    group, at, package = key.partition("@")
    if at:
        parsed = _hydra_key(text)
        if isinstance(parsed, str):
            return (f"Hydra cannot read this override's config-group key: {parsed}", "expected GROUP@PACKAGE=CHOICE")
        if parsed is not None:
            group, package = parsed
    problem = _hydra_own(key, group, package if at else None)
    if problem is not None:
        return problem
    if prefix != "~":
        for path in (group, package) if at else (key,):
            problem = _runtime_env(key, path, value, allow_runtime_env)
            if problem is not None:
                return problem
        problem = _worker_code(key, allow_runtime_env)
        if problem is not None:
            return problem
    return _resolver(value)


def _hydra_key(text: str):
    """(group, package) as Hydra's override parser reads the key; a string saying why it cannot; None
    where Hydra is not installed (the split of the key at '@' stands, which is Hydra's grammar)."""
    try:
        from hydra.core.override_parser.overrides_parser import OverridesParser
    except ImportError:
        return None
    try:
        override = _parser(OverridesParser).parse_override(text)
    except Exception as exc:  # noqa: BLE001 - Hydra's parse errors are of several kinds; its words are shown
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return override.key_or_group, override.package or ""


_PARSER: list = []


def _parser(cls):
    if not _PARSER:
        _PARSER.append(cls.create())
    return _PARSER[0]


_HYDRA_HINT = "leave it out; the bundle's folder and roots say where the job reads and writes"


def _hydra_own(key: str, group: str, package: str | None) -> Problem | None:
    if _at_or_under(group.replace("/", "."), "hydra"):
        # Hydra reads these itself, before verl: the job's folder (hydra.run.dir,
        # hydra.job.chdir), callbacks it instantiates, its search path.
        return (f"'{key}' configures Hydra itself, not verl: it moves where the job runs or what Hydra loads and "
                "instantiates, which the bundle's launch does not leave to an override", _HYDRA_HINT)
    if package is None:
        return None
    parts = package.split(".")
    if parts[0] == "_global_":
        parts = parts[1:]
    if not parts or parts == [""]:
        return (f"'{key}' places the config group '{group}' at the root of the config, where it can configure "
                "Hydra itself (its 'hydra' node) as well as verl", "name the package under verl's config it belongs in")
    if parts[0] == "hydra":
        return (f"'{key}' places the config group '{group}' in package '{package}', which is Hydra's own: it "
                "configures Hydra itself, not verl, and moves where the job runs or what Hydra loads and "
                "instantiates", _HYDRA_HINT)
    return None


def _at_or_under(path: str, top: str) -> bool:
    return path == top or path.startswith(top + ".")


def _runtime_env(key: str, path: str, value: str, allowed) -> Problem | None:
    parts = path.split(".")
    if RUNTIME_ENV not in parts:
        if path in _ABOVE_RAY_INIT and ("{" in value or "$" in value):
            return _whole_table(key)
        return None
    rest = parts[parts.index(RUNTIME_ENV) + 1:]
    if not rest or rest == [WORKER_ENV]:
        # A table (or an interpolation that makes one) at runtime_env or its env_vars:
        # keys no rule here or in rules.py would see.
        return _whole_table(key) if ("{" in value or "$" in value) else None
    name = rest[0]
    if name == WORKER_ENV or name in allowed:
        return None
    return (f"'{key}' sets Ray's runtime_env.{name}, which runs or installs code in every Ray worker of the job",
            f"if that is the intent, add \"{name}\" to [verl] allow_runtime_env, so it is part of the spec and a "
            "reviewer sees it; environment variables go in [env] set")


def _worker_code(key: str, allowed) -> Problem | None:
    for name, what in WORKER_CODE.items():
        if (key == name or key.endswith("." + name)) and name not in allowed:
            return (f"'{key}' names code verl runs in the job: {what}",
                    f"if that is the intent, add \"{name}\" to [verl] allow_worker_code, so it is part of the spec "
                    "and a reviewer sees it")
    return None


def _whole_table(key: str) -> Problem:
    return (f"'{key}' given a whole table can set the Ray workers' environment and runtime_env unchecked",
            "set each variable as its own override, +ray_kwargs.ray_init.runtime_env.env_vars.NAME=value (or in "
            "[env] set), so its name is checked")


def _resolver(value: str) -> Problem | None:
    start = value.find("${")
    while start != -1:
        if not re.compile(_NODE).match(value, start + 2):
            end = value.find("}", start)
            shown = value[start:end + 1] if end != -1 else value[start:]
            return (f"'{shown}' is a resolver interpolation: verl would resolve it when the job runs, reading the "
                    "launching environment into its config, its log and the Jobs API",
                    "to give the job a variable of your environment, list its name in env.passthrough: its value is "
                    "read at run time and never written")
        start = value.find("${", start + 2)
    return None
