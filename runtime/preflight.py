"""Checks that refuse a run before anything is submitted.

Each finding is one line saying what is wrong and what to do; all findings of
a stage are reported together. Local checks run before a head is started;
cluster checks run against the live cluster's ALIVE nodes, because a job
asking for resources a cluster lacks sits PENDING (900 s by default) instead
of failing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from tutorrl.compiler.pipeline import expand, reference
from tutorrl.contract import PYTHON_ENV, STACK_CHECK_ENV
from tutorrl.errors import PreflightRefused, RefusedError

# Run in the job's Python, by its path (it may have no tutorrl): its reward and verl-version roles.
_PROBE = Path(__file__).with_name("job_probe.py")

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# `org/name` that does not exist locally is a Hugging Face Hub id, which verl
# downloads itself; anything explicitly local (/, ~, ./, ../) is checked.
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass
class PreflightReport:
    """What one stage of checks found about the environment: problems refuse the run, notes are said.

    Each problem is a line already worded for the user (about a path, a Python, a cluster: no spec
    setting to place, which is what a :class:`tutorrl.errors.Finding` is).
    """

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def raise_if_any(self, stage: str) -> None:
        if self.problems:
            lines = [f"error: {p}" for p in self.problems]
            lines.append(f"refused by preflight ({stage}); nothing was submitted.")
            raise PreflightRefused("\n".join(lines))


def split_verl_list(value) -> list[str]:
    """verl's data.train/val as the paths verl opens: unset, one path, or a list.

    A string is one path even when it looks like ``[a, b]``: the compiler
    passes it to verl as one quoted string, and verl opens it as one file
    (a list of files is a TOML list in the spec).
    """
    if value is None:
        return []
    if isinstance(value, list):
        return list(value)
    return [value]


def root_values(spec, env: dict[str, str] | None = None) -> dict[str, str]:
    """What a run passes to the job for the spec's roots: the values set in
    this environment (launch.sh applies the spec's defaults to the others)."""
    env = os.environ if env is None else env
    return {name: env[name] for name in sorted(spec.roots) if env.get(name)}


def _root_env(spec, env: dict[str, str] | None = None) -> dict[str, str]:
    """Each root's value where the job starts: this environment's, else the spec's default."""
    passed = root_values(spec, env)
    return {name: passed.get(name) or root.default for name, root in spec.roots.items()
            if passed.get(name) or root.default}


def check_roots(spec, findings: PreflightReport, *, cluster: str | None = None, dry_run: bool = False,
                env: dict[str, str] | None = None) -> None:
    """Every root has a value for the job (set here, or the spec's default);
    on a cluster tutorrl did not start, a real run needs it absolute."""
    values = _root_env(spec, env)
    for name in sorted(spec.roots):
        value = values.get(name)
        if value is None:
            findings.problems.append(
                f"roots.{name}: {name} is not set in this environment and the spec gives no default; "
                f"export {name}=/path/to/the/folder before `tutorrl run` (its value is passed to the job)")
            continue
        where = "set here" if value == (env if env is not None else os.environ).get(name) else "the spec's default"
        if len(value) > os.pathconf("/", "PC_PATH_MAX"):
            findings.problems.append(f"roots.{name}: the value ({where}) is {len(value)} characters, longer than any "
                                     f"path this system can open: {value[:60]!r}...")
            continue
        findings.notes.append(f"root {name} = {value!r} ({where})")
        if cluster and not dry_run and not (_URI.match(value) or os.path.isabs(os.path.expanduser(value))):
            findings.problems.append(
                f"roots.{name}: {value!r} ({where}) is relative, but verl's Ray workers on {cluster} do not run in "
                f"this folder; export {name} as an absolute path for a run on an existing cluster")


def check_paths(spec, cwd: Path, findings: PreflightReport, *, dry_run: bool = False) -> None:
    """Local data and model paths must exist. A dry run only composes verl's
    config and reads none of them, so there a missing path is a note: the same
    bundle can be checked on a laptop that has no data."""
    entries: list[tuple[str, str, bool]] = []
    for key in ("train", "val"):
        for item in split_verl_list(getattr(spec.data, key)):
            entries.append((f"data.{key}", item, False))
    if spec.model.path is not None:
        entries.append(("model.path", spec.model.path, True))
    # The reward's own files: a reward file, and what a plug-in reads.
    entries += [(key, raw, False) for key, raw in spec_paths(spec)
                if key == "reward.path" or key.startswith("reward.options.")]
    values = _root_env(spec)
    for key, raw, may_be_hub in entries:
        rooted = reference(raw) is not None and reference(raw)[0] in spec.roots
        if rooted:
            written, raw = raw, expand(raw, values)
            if raw is None:
                continue  # the root has no value: check_roots says so
            key = f"{key} ({written})"
        if _URI.match(raw):
            findings.notes.append(f"{key} = {raw!r} is remote; not checked here")
            continue
        expanded = os.path.expanduser(raw)
        path = Path(expanded) if os.path.isabs(expanded) else cwd / expanded
        try:
            if path.exists():
                continue
        except OSError as exc:  # a name longer than the file system takes, a loop of links
            findings.problems.append(f"{key}: {raw[:200]!r}{'...' if len(raw) > 200 else ''} cannot be checked "
                                     f"({exc.strerror})")
            continue
        explicit = rooted or raw.startswith(("/", "~", "./", "../"))
        if may_be_hub and not explicit and _HUB_ID.match(raw):
            findings.notes.append(f"{key} = {raw!r} is not a local path; taken as a Hugging Face Hub id")
            continue
        message = (f"{key}: {raw!r} does not exist (looked for {path}; relative paths are relative to "
                   f"the directory tutorrl runs in)")
        if dry_run:
            findings.notes.append(message + "; a dry run reads no data, a real run would be refused")
        else:
            findings.problems.append(message)


def spec_paths(spec) -> list[tuple[str, str]]:
    """(dotted key, value) of every path verl or its reward workers read."""
    out = [(f"data.{k}", item) for k in ("train", "val") for item in split_verl_list(getattr(spec.data, k))]
    out += [(key, value) for key, value in (("model.path", spec.model.path),
                                            ("trainer.output_dir", spec.trainer.output_dir),
                                            ("reward.path", spec.reward.path)) if value is not None]
    if spec.reward.plugin is not None:
        from tutorrl.compiler.spec import plugin_of

        plugin, options = plugin_of(spec)
        out += plugin.paths(options)
    return out


def check_relative_paths(spec, where: str, findings: PreflightReport) -> None:
    """On a cluster tutorrl did not start, verl's Ray workers run in whatever
    folder that cluster's raylet started in, so a relative path would be read
    (or a checkpoint written) somewhere else than here, or in Ray's temporary
    copy of an uploaded bundle. The embedded head is started in the user's
    folder, where relative paths keep their meaning."""
    for key, raw in spec_paths(spec):
        if _URI.match(raw) or os.path.isabs(raw) or raw.startswith("~"):
            continue
        ref = reference(raw)
        if ref is not None and ref[0] in spec.roots:
            continue  # under a root: check_roots wants the root's value absolute
        if key == "model.path" and _HUB_ID.match(raw) and not raw.startswith(("./", "../")):
            continue
        findings.problems.append(
            f"{key}: {raw!r} is relative, but verl's Ray workers on {where} do not run in this folder; "
            "use an absolute path, a URI, or a root (the spec's [roots], e.g. \"$DATA_ROOT/...\") for a run on an "
            "existing cluster (a --dry-run reads no paths)")


def same_environment(python: str) -> bool:
    """Whether ``python`` is the interpreter of tutorrl's own environment. A
    virtualenv's interpreter is a link to the base one, so two environments'
    interpreters resolve to one file: the folder that holds the link is what
    tells them apart (its pyvenv.cfg chooses the site-packages)."""
    here = os.path.realpath(os.path.dirname(sys.executable))
    return os.path.realpath(os.path.dirname(os.path.abspath(python))) == here


def installed_verl(python: str | None = None) -> str | None:
    """verl's release in ``python`` (another environment is asked, as launch.sh asks it)."""
    if python is None or same_environment(python):
        try:
            return metadata.version("verl")
        except metadata.PackageNotFoundError:
            return None
    try:
        proc = subprocess.run([python, str(_PROBE), "verl-version"],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def check_verl(target: str, findings: PreflightReport, python: str) -> None:
    found = installed_verl(python)
    if found is None:
        findings.problems.append(
            f"verl is not installed for {python}, which the job runs under; the bundle targets verl {target} "
            f"(pip install 'verl=={target}')"
        )
    elif found != target:
        findings.problems.append(
            f"verl {found} is installed for {python}, but the bundle targets verl {target}; install "
            f"verl=={target} or recompile the spec with experiment.verl = \"{found}\""
        )



# Where verl's reward workers import from, and how to put a module there.
REWARD_HOW = (
    "make it importable where verl's Ray workers run: install it as a package into the job's environment "
    "(`PYTHON -m pip install -e YOUR_PACKAGE`), or put its folder on the workers' path with the spec's "
    "[env] set = { PYTHONPATH = \"/absolute/folder\" } (it travels in the job's runtime_env), or ship it "
    "with the job through Ray's runtime_env (working_dir / py_modules) on a cluster without a shared filesystem"
)


def reward_target(spec) -> tuple[str, str] | None:
    """(module, function) verl's reward workers will import, or None for verl's
    own default reward. The one place that reads the spec's reward section."""
    reward = getattr(spec, "reward", None)
    module = getattr(reward, "module", None)
    if not module:
        return None
    return str(module), str(getattr(reward, "function", None) or "compute_score")


def job_environment(job: dict, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment the job's processes see on a head started here: ours,
    plus the bundle's runtime_env variables (which launch.sh also sources)."""
    env = dict(os.environ if base is None else base)
    env.update({str(k): str(v) for k, v in ((job.get("runtime_env") or {}).get("env_vars") or {}).items()})
    return env


def job_python(env: dict[str, str]) -> str:
    """The interpreter launch.sh runs: ``TUTORRL_PYTHON``, else the ``python``
    the embedded head finds first on its PATH (the one tutorrl runs under)."""
    chosen = env.get(PYTHON_ENV)
    if not chosen:
        return sys.executable
    path = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    return shutil.which(chosen, path=path) or chosen


def reward_import_problems(python: str, module: str, function: str, *, env: dict[str, str] | None = None,
                           cwd: str | Path | None = None, timeout: float = 300.0) -> list[str]:
    """Import ``module`` with ``python`` (in ``env``, from ``cwd``) and find
    ``function`` in it; each problem says what is missing and how to fix it.

    ``cwd`` is the folder the job starts in: the probe puts it first on
    ``sys.path``, as ``python -m verl...`` does for the driver, and Ray adds the
    driver's folder to its workers' path.
    """
    label = f"reward function {module}.{function}"
    try:
        proc = subprocess.run([python, str(_PROBE), "reward", module, function], env=env, cwd=cwd,
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    except FileNotFoundError:
        return [f"{label}: the job's Python {python} does not exist"]
    except subprocess.TimeoutExpired:
        return [f"{label}: importing {module} with {python} took longer than {timeout:g} s; "
                "an import that slow would stall every reward worker"]
    try:
        result = json.loads(proc.stdout.decode("utf-8", "replace"))
    except ValueError:
        tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        return [f"{label}: {python} could not check it (exit {proc.returncode}: {tail[0]})"]
    kind = result.get("kind")
    if kind == "ok":
        return []
    if kind == "missing":
        missing = result["name"]
        what = f"no module named {missing!r}" if missing == module else \
            f"no module named {missing!r} (the package of {module})"
        return [f"{label}: the job's Python ({python}) cannot import {module}: {what}; {REWARD_HOW}"]
    if kind == "dependency":
        return [f"{label}: {module} is found, but importing it fails because {result['name']!r} is not "
                f"installed for the job's Python ({python}): {result['error']}; install it into the job's "
                "environment"]
    if kind == "error":
        where = f" at {result['where']}" if result.get("where") else ""
        return [f"{label}: importing {module} with the job's Python ({python}) raised {result['error']}{where}"]
    if kind == "no-function":
        names = result.get("names") or []
        near = ""
        if names:
            import difflib

            close = difflib.get_close_matches(function, names, n=1)
            near = f" (did you mean {close[0]!r}?)" if close else f" (it defines: {', '.join(names)})"
        return [f"{label}: {module} ({result['file']}) has no {function!r}{near}; set reward.function to "
                "the function verl should call"]
    if kind == "not-callable":
        return [f"{label}: {module}.{function} is a {result['type']}, not a function"]
    return [f"{label}: unexpected answer from {python}: {result!r}"]


def check_reward(spec, job: dict, findings: PreflightReport, *, cwd: Path, cluster: str | None = None,
                 dry_run: bool = False) -> None:
    """The reward function must import in the job's Python before anything is
    submitted: verl imports it in its reward workers only once training starts,
    and a dry run (verl's --cfg job) never imports it at all."""
    target = reward_target(spec)
    if target is None:
        return
    module, function = target
    if cluster:
        findings.notes.append(f"reward function {module}.{function}: imported by the cluster's Python, not "
                              f"checked here; {REWARD_HOW}")
        return
    env = job_environment(job)
    for problem in reward_import_problems(job_python(env), module, function, env=env, cwd=cwd):
        if dry_run:
            findings.notes.append(f"{problem} (a dry run does not import the reward; a real run would be refused)")
        else:
            findings.problems.append(problem)


def check_passthrough(names: list[str], findings: PreflightReport) -> None:
    missing = [n for n in names if n not in os.environ]
    if missing:
        findings.problems.append(
            "passthrough variable(s) not set in this environment: " + ", ".join(missing)
            + " (the spec's env.passthrough names them; export them before `tutorrl run`)"
        )


def _pool(spec):
    """The GPU pool as verl will see it (compiler/pipeline/effective_values.py); unknown is refused here."""
    from tutorrl.compiler.pipeline import gpu_pool

    pool = gpu_pool(spec)
    for setting, value, where in (("resources.nodes", pool.nodes, pool.nodes_from),
                                  ("resources.trainer_gpus_per_node", pool.per_node, pool.per_node_from)):
        if value is None:
            raise RefusedError(f"{setting} is unset and {where}; set it in the spec")
    for key, value, where in (("rollout.nnodes", pool.rollout_nodes, pool.rollout_nodes_from),
                              ("rollout.n_gpus_per_node", pool.rollout_per_node, pool.rollout_per_node_from)):
        if value is None:
            raise RefusedError(f"the rollout's pool cannot be counted: {key}: {where}; "
                               f"set it in [verl] extra_overrides as {key}=N")
    return pool


def gpu_layout(spec) -> tuple[int, int, int]:
    """(nodes, trainer GPUs per node, reward GPUs), verl's defaults where the spec says nothing."""
    pool = _pool(spec)
    return pool.nodes, pool.per_node, pool.reward


def needed_nodes(spec) -> int:
    """The fewest nodes the launch needs: the trainer's pool and the rollout's each span their own nodes."""
    pool = _pool(spec)
    return max(pool.nodes, pool.rollout_nodes)


def needed_gpus(spec) -> int:
    return _pool(spec).total


def _layout_text(spec) -> str:
    """``resources.nodes 1 (verl 0.9.1's default) x trainer_gpus_per_node 7 + reward_gpus 1``."""
    pool = _pool(spec)

    def said(where: str) -> str:
        return f" ({where})" if where else ""

    trainer = (f"resources.nodes {pool.nodes}{said(pool.nodes_from)} x "
               f"trainer_gpus_per_node {pool.per_node}{said(pool.per_node_from)}")
    if not pool.split:
        return f"{trainer} + reward_gpus {pool.reward}"
    # Two pools: each is named, so a user sees which one the cluster cannot hold.
    return (f"trainer pool {trainer} + rollout pool rollout.nnodes {pool.rollout_nodes}"
            f"{said(pool.rollout_nodes_from)} x rollout.n_gpus_per_node {pool.rollout_per_node}"
            f"{said(pool.rollout_per_node_from)} + reward_gpus {pool.reward}")


def check_cluster(spec, job: dict, resources, *, dry_run: bool, where: str, findings: PreflightReport) -> None:
    """Refuse what the cluster could never schedule."""
    if resources.alive_nodes == 0:
        findings.problems.append(f"{where} has no ALIVE node")
        return
    have = resources.gpus
    need = needed_gpus(spec)
    if dry_run:
        findings.notes.append(f"dry run: GPU check skipped (a real run needs {need} GPU, {where} has {have:g})")
    elif have < need:
        findings.problems.append(
            f"the spec needs {need} GPU ({_layout_text(spec)}), but {where} has {have:g} GPU "
            f"over {resources.alive_nodes} ALIVE node(s)"
        )
    elif resources.alive_nodes < needed_nodes(spec):
        findings.problems.append(
            f"the spec needs {needed_nodes(spec)} nodes, but {where} has {resources.alive_nodes} ALIVE node(s)"
        )
    # The entrypoint itself must fit on one node, or Ray leaves it PENDING.
    wants: dict[str, float] = dict(job.get("entrypoint_resources") or {})
    for kwarg, resource in (("entrypoint_num_cpus", "CPU"), ("entrypoint_num_gpus", "GPU"),
                            ("entrypoint_memory", "memory")):
        value = job.get(kwarg)
        if value:
            wants[resource] = float(value)
    if dry_run:
        wants.pop("GPU", None)
    if wants and not any(all(node.get(k, 0.0) >= v for k, v in wants.items()) for node in resources.per_node):
        shown = ", ".join(f"{k}={v:g}" for k, v in sorted(wants.items()))
        findings.problems.append(f"no ALIVE node of {where} can host the job's entrypoint ({shown})")


def check_stack(spec, job: dict, findings: PreflightReport, *, cwd: Path, cluster: str | None = None,
                dry_run: bool = False) -> None:
    """The job's Python must have what verl's trainer imports as a run starts
    (transfer_queue on every v1 run, the rollout engine's server) at the
    versions recorded for the bundle's release (runtime/stacks/): a missing
    one fails only after Ray, the workers and the model are up. Notes in a dry
    run, which imports none of it; TUTORRL_STACK_CHECK=skip for a stack
    managed by hand (said in a note)."""
    from tutorrl.compiler.spec import variant_of
    from tutorrl.runtime import stack as stacks

    release, engine = spec.experiment.verl, spec.rollout.engine
    wanted = stacks.stack_for(release, engine, variant_of(spec))
    env = job_environment(job)
    python = job_python(env)
    if cluster:
        how = f": {stacks.install_command('python', wanted)}" if wanted else ""
        findings.notes.append(f"verl {release}'s training stack: the cluster's Python is not checked here{how}")
        return
    if os.environ.get(STACK_CHECK_ENV) == "skip":
        findings.notes.append("training stack not checked (TUTORRL_STACK_CHECK=skip)")
        return
    if wanted is None:
        findings.notes.append(f"no training stack is recorded for verl {release} (runtime/stacks/ has "
                              f"{', '.join(stacks.releases())}); only verl's version is checked")
        return
    if wanted.engine is None:
        findings.notes.append(f"rollout.engine {engine or 'unset'}: no constraints recorded for it with verl "
                              f"{release} (recorded: {', '.join(stacks.engines(release))}); the trainer's "
                              "other start modules are checked")
    if wanted.unresolvable:
        findings.notes.append(stacks.unresolvable_note(wanted))
    if dry_run:
        # A dry run composes the config and imports none of the stack; the
        # probe imports verl's trainer modules, and torch with them.
        findings.notes.append(f"verl {release}'s training stack: checked on a real run, not a dry run "
                              f"(the job's Python must import verl's trainer start modules"
                              + (f" and the {wanted.engine} rollout server" if wanted.engine else "") + ")")
        return
    found = stacks.probe(python, wanted, env=env, cwd=cwd)
    findings.problems.extend(stacks.compare(wanted, found, python))
    findings.notes.extend(stacks.differences(wanted, found, python))
