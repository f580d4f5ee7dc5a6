"""What verl will see: each setting's value in a launch, and the GPU pool it asks for.

One home for "the spec's value, else verl's default for the target release"
(the defaults come from the release's lock): the compiler's rules, the run
preflight, the review diff and the exports all ask here, so a default that
moves between releases moves for all of them at once.
"""

from __future__ import annotations

import re

import msgspec

from tutorrl.compiler.release import Lock
from tutorrl.compiler.spec import Spec, get_field


class Effective:
    """A setting's value as verl will see it: the spec's, else the release's default."""

    def __init__(self, spec: Spec, lock: Lock):
        self.spec = spec
        self.lock = lock

    def __call__(self, setting: str):
        value = get_field(self.spec, setting)
        if value is not None:
            return value
        target = self.lock.targets.get(setting)
        if target is None:
            return None
        if target.interpolation:
            return self.interpolate(target.interpolation)
        return target.default

    def interpolate(self, text: str):
        """Resolve plain ``${a.b}`` references to other mapped keys (verl's defaults such as
        ``checkpoints/${trainer.project_name}/${trainer.experiment_name}``); None when one cannot be."""
        by_key = {t.key: name for name, t in self.lock.targets.items()}
        failed = False

        def sub(match: "re.Match") -> str:
            nonlocal failed
            setting = by_key.get(match.group(1))
            value = self(setting) if setting else None
            if value is None or isinstance(value, (dict, list)):
                failed = True
                return ""
            return str(value)

        whole = re.fullmatch(r"\$\{([A-Za-z0-9_.]+)\}", text)
        if whole:
            setting = by_key.get(whole.group(1))
            return self(setting) if setting else None
        out = re.sub(r"\$\{([A-Za-z0-9_.]+)\}", sub, text)
        return None if failed or "${" in out else out


def effective(spec: Spec) -> Effective:
    """Values as verl will see them for a (normalised) spec, defaults from its release's lock."""
    from tutorrl.compiler.release import load_lock
    from tutorrl.compiler.spec import variant_of

    return Effective(spec, load_lock(spec.experiment.verl, variant_of(spec), spec.experiment.entry))


class GpuPool(msgspec.Struct, frozen=True):
    """The GPUs a launch asks for: verl's pool (nodes x trainer GPUs per node), the reward's, and
    the rollout's own pool for an entry point that runs the rollout apart from the trainer."""

    #: None where the spec leaves it unset and the release's default is not known here.
    nodes: int | None
    per_node: int | None
    reward: int
    #: Where each came from: "" (the spec), "verl 0.9.1's default", or why it is a guess.
    nodes_from: str
    per_node_from: str
    #: The rollout's pool (fully_async, one_step_off: `rollout.nnodes` x `rollout.n_gpus_per_node`, in
    #: `[verl] extra_overrides` or the entry's default); 0 x 0 for an entry whose rollout shares the trainer's GPUs.
    rollout_nodes: int | None = 0
    rollout_per_node: int | None = 0
    rollout_nodes_from: str = ""
    rollout_per_node_from: str = ""

    @property
    def split(self) -> bool:
        """Whether the rollout has GPUs of its own."""
        return self.rollout_nodes != 0 or self.rollout_per_node != 0

    @property
    def total(self) -> int | None:
        nodes, per_node, r_nodes, r_per_node = self.nodes, self.per_node, self.rollout_nodes, self.rollout_per_node
        if nodes is None or per_node is None or r_nodes is None or r_per_node is None:
            return None
        return nodes * per_node + r_nodes * r_per_node + self.reward


_POOL = ("resources.nodes", "resources.trainer_gpus_per_node")


def gpu_pool(spec: Spec) -> GpuPool:
    """The spec's pool, verl's default for its release where unset; for a release this
    tutorrl has no lock for (a bundle compiled elsewhere), the default every release it
    does lock agrees on, else unknown (None)."""
    from tutorrl.compiler.release import load_lock
    from tutorrl.compiler.release.keymap import supported_releases
    from tutorrl.compiler.spec import variant_of
    from tutorrl.errors import SpecError

    found: list[tuple[int | None, str]] = []
    for setting in _POOL:
        value = get_field(spec, setting)
        if value is not None:
            found.append((int(value), ""))
            continue
        release, variant = spec.experiment.verl, variant_of(spec)
        try:
            lock = load_lock(release, variant, spec.experiment.entry)
        except SpecError:
            lock = None
        if lock is not None and setting in lock.targets:
            default = Effective(spec, lock)(setting)
            where = f"verl {release}'s default"
        else:
            seen = {load_lock(r, variant).targets[setting].default for r in supported_releases()
                    if setting in load_lock(r, variant).targets}
            default = seen.pop() if len(seen) == 1 else None
            where = f"verl's default in every release this tutorrl knows; {release} is not one of them"
        if not isinstance(default, int) or isinstance(default, bool):
            default, where = None, f"verl {release}'s default is not known to this tutorrl"
        found.append((default, where))
    (nodes, nodes_from), (per_node, per_node_from) = found
    (r_nodes, r_nodes_from), (r_per_node, r_per_node_from) = _rollout_pool(spec)
    return GpuPool(nodes, per_node, int(spec.resources.reward_gpus or 0), nodes_from, per_node_from,
                   r_nodes, r_per_node, r_nodes_from, r_per_node_from)


#: An entry whose own config has these keys places its rollout on a pool of its own (verl's
#: one_step_off and fully_async trainers build a second resource pool from them).
_ROLLOUT_POOL = ("rollout.nnodes", "rollout.n_gpus_per_node")


def _rollout_pool(spec: Spec) -> list[tuple[int | None, str]]:
    """(value, where it came from) of each of `_ROLLOUT_POOL`: the spec's `[verl] extra_overrides`,
    else the entry's default at its release (its key set); (0, "") twice for an entry without them."""
    from tutorrl.compiler.release import find_entry, load_keyset
    from tutorrl.compiler.release.keymap import supported_releases
    from tutorrl.compiler.spec import variant_of
    from tutorrl.errors import InputError, SpecError

    entry = find_entry(spec.experiment.entry)
    if entry is None or entry.default:
        return [(0, ""), (0, "")]
    release, variant = spec.experiment.verl, variant_of(spec)

    def keys(r: str):
        try:
            return load_keyset(r, variant, entry.name).keys
        except (InputError, SpecError, OSError):
            return None

    own = keys(release)
    if own is not None and not any(k in own for k in _ROLLOUT_POOL):
        return [(0, ""), (0, "")]
    written = _written(spec.verl.extra_overrides)
    out: list[tuple[int | None, str]] = []
    for key in _ROLLOUT_POOL:
        if key in written:
            value = written[key]
            out.append((value, "") if value is not None else
                       (None, "its value in [verl] extra_overrides is not a whole number tutorrl can count"))
            continue
        if own is not None:
            default, where = (own[key].default if key in own else None), f"{entry.name}'s default at verl {release}"
        else:
            seen = {ks[key].default for ks in map(keys, supported_releases()) if ks is not None and key in ks}
            default = seen.pop() if len(seen) == 1 else None
            where = f"{entry.name}'s default in every release this tutorrl knows; {release} is not one of them"
        if not isinstance(default, int) or isinstance(default, bool):
            default, where = None, f"{entry.name}'s default at verl {release} is not known to this tutorrl"
        out.append((default, where))
    return out


def _written(overrides) -> dict[str, int | None]:
    """The rollout pool's keys as `[verl] extra_overrides` set them (the last one wins, as in Hydra);
    None for a value that is not a plain integer (an interpolation, a variable)."""
    found: dict[str, int | None] = {}
    for text in overrides:
        key, sep, value = text.partition("=")
        key = key.lstrip("+")
        if not sep or key not in _ROLLOUT_POOL:
            continue
        value = value.strip()
        found[key] = int(value) if re.fullmatch(r"[0-9]+", value) else None
    return found
