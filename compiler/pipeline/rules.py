"""Cross-field rules: no stricter than verl.

Pure: ``check_rules(spec, lock)`` returns :class:`Finding` s with a severity.
A rule is an **error** only where verl (or Megatron) refuses the same launch
at start-up -- each such rule names the module and function that enforce it,
so the user learns now what a GPU cluster would tell them after minutes of
start-up. A rule verl does not enforce is a **warning**: the launch is still
compiled. tutorrl's own safety rules (secrets, reserved names) are errors.

Values the spec leaves unset are verl's defaults for the target release (the
lock carries them), so a rule sees what verl will see.
"""

from __future__ import annotations

import re

from tutorrl.compiler.pipeline.effective_values import Effective
from tutorrl.compiler.release import Lock
from tutorrl.compiler.release.keymap import release_tuple
from tutorrl.compiler.spec import Spec, get_field
from tutorrl.errors import Finding, Severity  # noqa: F401 (one shape for every check's outcome; its home is tutorrl.errors)


# Advantage estimators that compare several responses to the same prompt.
GROUP_ESTIMATORS = frozenset({
    "grpo", "rloo", "grpo_passk", "gpg", "opo", "rloo_vectorized", "grpo_vectorized", "gdpo",
})
# Names whose values are credentials: token, key, pass(word), pat, secret,
# credential(s) -- as whole words of an environment name, in any case; a word
# ends at "_", at a lower-to-upper change (githubToken, MyCredential) or before
# trailing digits (TOKEN2). Run together in capitals (DBPASSWORD, OAUTHTOKEN),
# only the unambiguous words count at the end (KEY would take in MONKEY).
_SECRET_WORDS = frozenset({"KEY", "APIKEY", "TOKEN", "PASS", "PASSWD", "PASSWORD", "PASSPHRASE", "PAT", "SECRET",
                           "CREDENTIAL", "CREDENTIALS", "PWD", "BEARER", "COOKIE", "COOKIES"})
_SECRET_TAIL = tuple(w + "KEY" for w in ("API", "AI", "ACCESS", "SSH", "PRIVATE", "SIGNING", "SESSION", "MASTER",
                                         "ENCRYPTION")) + ("TOKEN", "PASSWD", "PASSWORD", "PASSPHRASE", "SECRET",
                                                           "CREDENTIAL", "CREDENTIALS")
# AUTH ends a credential's name (NPM_AUTH, NPM_CONFIG__AUTH) but also begins
# settings (RAY_AUTH_MODE): it counts as the last word only.
_SECRET_LAST = frozenset({"AUTH"})
_WORDS = r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+"
# Bash's own (PWD, OLDPWD): a folder, never a credential.
_NOT_SECRET = frozenset({"PWD", "OLDPWD"})
from tutorrl.contract import RESERVED_PREFIX as RESERVED_ENV_PREFIX  # noqa: E402
# Variables that decide which program, library or code the launch runs: set in
# bundle.env they take the launch over (a stand-in `python` first on PATH once
# ran and the dry run still reported success). Allowed only when env.allow
# names them, which `tutorrl diff` shows a reviewer.
# (Sets and prefixes, not one regular expression: compiling it was a tenth
# of a millisecond of every cold compile.)
# HOME is one: Python's site module adds HOME's user site (~/.local/lib/
# pythonX.Y/site-packages) to sys.path and runs its .pth files at start-up,
# so `HOME = "/evil"` ran a fake verl as the trainer. glibc reads
# GLIBC_TUNABLES and LOCPATH in every process before main. (TMPDIR and
# XDG_* are not: neither bash nor Python's start-up reads them.)
_TAKEOVER_NAMES = frozenset({
    "PATH", "BASH_ENV", "ENV", "IFS", "CDPATH", "GLOBIGNORE", "EXECIGNORE", "POSIXLY_CORRECT", "PS4", "PROMPT_COMMAND",
    "GCONV_PATH", "OPENSSL_CONF", "OPENSSL_ENGINES", "PERLLIB", "PERL5LIB", "PERL5OPT", "RUBYLIB", "RUBYOPT",
    "NODE_OPTIONS", "NODE_PATH", "JAVA_TOOL_OPTIONS", "RAY_RUNTIME_ENV_HOOK", "PYTHON",
    "HOME", "GLIBC_TUNABLES", "LOCPATH",
    # verl imports every module this names in every process that imports verl (verl/__init__.py,
    # import_external_libs): a module name is code, as PYTHONPATH is.
    "VERL_USE_EXTERNAL_MODULES"})
# Each followed by at least one more character (PYTHON alone is in the names).
_TAKEOVER_PREFIXES = ("BASH_", "LD_", "DYLD_", "PYTHON")


def takes_over(name: str) -> bool:
    """Whether setting ``name`` decides which program, library or code the launch runs."""
    return name in _TAKEOVER_NAMES or (name.startswith(_TAKEOVER_PREFIXES) and name not in _TAKEOVER_PREFIXES)
# Bash refuses assignments to these (readonly) or silently ignores them: the
# launch would die at `source bundle.env`, or not get the value.
_BASH_OWNED = frozenset({"UID", "EUID", "PPID", "SHELLOPTS", "BASHOPTS", "BASH_VERSINFO", "BASHPID", "GROUPS",
                         "FUNCNAME", "BASH_ARGC", "BASH_ARGV", "BASH_LINENO", "BASH_SOURCE", "BASH_SUBSHELL",
                         "RANDOM", "SECONDS", "LINENO", "HOSTNAME", "HOSTTYPE", "OSTYPE", "MACHTYPE", "EPOCHSECONDS",
                         "EPOCHREALTIME", "SRANDOM", "BASH_COMMAND"})


# Names bash itself sets or changes as it runs (PWD at every cd, SHLVL and _
# at start, OLDPWD, SHELL, OPTIND, ...), besides the ones it owns outright: a
# root named so gets bash's value, not a folder of the job's, and stopped
# every launch. Refused as root names.
_BASH_SETS = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "SHELL", "BASH", "OPTIND", "OPTARG", "OPTERR", "REPLY",
                        "PIPESTATUS", "DIRSTACK", "HISTCMD", "HISTFILE", "HISTSIZE", "HISTFILESIZE", "COLUMNS",
                        "LINES", "PS1", "PS2", "PS3", "MAIL", "MAILCHECK", "MAILPATH", "TERM", "COMP_WORDBREAKS",
                        "COPROC", "READLINE_LINE", "READLINE_POINT", "TMOUT", "FUNCNEST", "INPUTRC"})


def bash_changes(name: str) -> bool:
    """Whether bash owns ``name`` or sets it itself, so a value given for it does not hold."""
    return name in _BASH_OWNED or name in _BASH_SETS or name.startswith(("BASH_", "COMP_", "READLINE_"))


def _words(part: str) -> list[str]:
    """The words of one ``_``-separated part of a name, as :data:`_WORDS` splits them."""
    # Capitals alone (most parts of most names) are one word: the pattern, compiled by
    # re's cache at the first other part, is not needed for them.
    if part.isascii() and part.isalpha() and part.isupper():
        return [part]
    return re.findall(_WORDS, part)


def looks_secret(name: str) -> bool:
    if name.upper() in _NOT_SECRET:
        return False
    ordered = [w.upper() for part in name.split("_") for w in _words(part) if not w.isdigit()]
    return (bool(set(ordered) & _SECRET_WORDS) or name.upper().rstrip("0123456789").endswith(_SECRET_TAIL)
            or bool(ordered and ordered[-1] in _SECRET_LAST))


def check_rules(spec: Spec, lock: Lock) -> list[Finding]:
    value = Effective(spec, lock)
    out: list[Finding] = []
    out += _batches(spec, value)
    out += _parallel_layout(spec, value)
    out += _reward(spec)
    out += _env(spec)
    out += _trainer(spec, value)
    out += _evidence(spec)
    out += _control_release(spec, value)
    out += _unread(spec, value)
    out += _entry_never_reads(spec, value)
    return out


def _entry_never_reads(spec: Spec, value: Effective) -> list[Finding]:
    # An entry point's config declares main_ppo's keys, but its own trainer may never read one
    # (entries.toml's never_reads): a setting written to it would do nothing, silently.
    from tutorrl.compiler.release import find_entry

    lock = value.lock
    entry = find_entry(lock.entry) if lock.entry else None
    if entry is None:
        return []
    out = []
    why = entry.stops.get(lock.release)
    if why is not None:
        runs = [r for r in entry.releases if entry.runs_at(r)]
        out.append(Finding("experiment.entry", f"entry point '{entry.name}' ({entry.module}) stops at import with "
                                               f"verl {lock.release}: {why}",
                           f"target verl {' or '.join(runs)}, where it starts" if runs else
                           "no release tutorrl has its key sets for starts this code"))
    for name, target in lock.targets.items():
        why = entry.never_reads.get(target.key)
        if why is None or get_field(spec, name) in (None, False):
            continue  # unset, or off (writes nothing)
        out.append(Finding(name, f"verl {lock.release}'s entry point '{entry.name}' ({entry.module}) never reads "
                                 f"{target.key}: {why}",
                           f"leave {name} unset for this entry point"))
    return out


def _unread(spec: Spec, value: Effective) -> list[Finding]:
    # verl takes the key and nothing reads it -- or not the chosen rollout
    # engine (the key map says where that was read): written as the spec
    # says -- it is the user's launch -- and said.
    lock, engine, out = value.lock, value("rollout.engine"), []
    for name, target in lock.targets.items():
        if not target.unread or get_field(spec, name) is None:
            continue
        if target.unread_engines and engine not in target.unread_engines:
            continue
        with_engine = f" with rollout.engine = {engine!r}" if target.unread_engines else ""
        out.append(Finding(name, f"has no effect in verl {lock.release} ({lock.variant}){with_engine}, which takes "
                           f"{target.key} and does not use it: {target.unread}", severity="warning"))
    return out


def _evidence(spec: Spec) -> list[Finding]:
    out: list[Finding] = []
    # Only the in-run callback can stop training; the post-run scan comes too late.
    if spec.evidence.on_failure == "stop" and spec.trainer.evidence_callback is not True:
        out.append(Finding("evidence.on_failure", "\"stop\" needs the in-run evidence hook to stop anything",
                           "set trainer.evidence_callback = true"))
    # The control resets every tensor sglang's /weights_checker sees -- with
    # LoRA, the frozen base -- and relies on verl's re-push to restore them; verl
    # pushes only the adapter after the first sync (evidence/publication.py).
    lora = spec.model.lora
    if spec.evidence.publication_control is True and lora is not None and (lora.rank or 0) > 0:
        out.append(Finding(
            "evidence.publication_control",
            "cannot run with LoRA (model.lora.rank > 0): after the first sync verl 0.9.1 pushes only the adapter "
            "(engine_workers.py:787-805, sglang_rollout.py:338-357 load_lora_adapter_from_tensor), and sglang's "
            "/weights_checker hashes and resets only parameters and buffers -- the frozen base, not the adapter -- "
            "so reset_tensors would leave the engines serving random base weights that no re-push restores",
            "remove publication_control; a LoRA run's record checks that the served base is unchanged and says the "
            "adapter is not verifiable"))
    elif (spec.trainer.evidence_callback is True and lora is not None and (lora.rank or 0) > 0
          and spec.rollout.engine == "sglang"):
        # Said before the run, so the record's "adapter not verifiable" is expected, not a surprise.
        out.append(Finding(
            "model.lora.rank",
            "the in-run publication check of this LoRA run proves the served base unchanged, not the adapter: sglang "
            "keeps LoRA adapter weights as plain tensor attributes (srt/lora/layers.py), which /weights_checker does "
            "not hash, so every record says \"adapter not verifiable\"", None, "warning"))
    return out


def _control_release(spec: Spec, value: Effective) -> list[Finding]:
    # sglang's compare frees the control's snapshot only from 0.5.21; the run
    # refuses the control on older engines (evidence/sglang.py, SNAPSHOT_HELD).
    lora = spec.model.lora
    if spec.evidence.publication_control is not True or (lora is not None and (lora.rank or 0) > 0):
        return []
    if value("rollout.engine") != "sglang":
        return []
    return [Finding(
        "evidence.publication_control",
        "runs only on sglang 0.5.21+, whose compare frees the snapshot: on 0.5.12-0.5.20 (verl 0.9.1's pin 0.5.12, "
        "tutorrl's stack 0.5.14) nothing frees it, so every engine would keep a host-memory copy of every served "
        "tensor (~2 bytes a parameter in bf16, ~64 GB for a 32B model) until it exits; there the run refuses the "
        "control and its records say so", None, "warning")]


def _int(x) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _batches(spec: Spec, value: Effective) -> list[Finding]:
    out: list[Finding] = []
    train, mini = _int(value("data.train_batch_size")), _int(value("actor.ppo_mini_batch_size"))
    n = _int(value("rollout.n")) or 1
    nodes, per_node = _int(value("resources.nodes")) or 1, _int(value("resources.trainer_gpus_per_node")) or 1
    n_gpus = nodes * per_node
    dynamic = bool(value("actor.use_dynamic_bsz"))
    for role in ("actor.ppo", "rollout.log_prob", "ref.log_prob", "critic.ppo"):
        section, _, stem = role.partition(".")
        if get_field(spec, f"{section}.{stem}_micro_batch_size") is not None and \
                get_field(spec, f"{section}.{stem}_micro_batch_size_per_gpu") is not None:
            # verl/utils/config.py validate_config: check_mutually_exclusive.
            out.append(Finding(f"{section}.{stem}_micro_batch_size",
                               f"{section}.{stem}_micro_batch_size and {stem}_micro_batch_size_per_gpu are both set",
                               "verl refuses both at start (verl/utils/config.py, check_mutually_exclusive); keep the per-GPU one"))
    if dynamic or train is None or mini is None:
        return out
    if train < mini:
        # Refused at start from verl 0.3.0: RayPPOTrainer._validate_config asserts train >= mini
        # (verl/trainer/ppo/ray_trainer.py) up to 0.5.x, ActorConfig.validate raises from 0.6.0.
        # verl 0.2 checks nothing: its actor splits the step's batch into mini-batches of at most
        # that size, so the whole batch is one mini-batch -- it runs, likely not as meant.
        release = release_tuple(value.lock.release)
        change = f"set it to at most {train}, or data.train_batch_size to at least {mini}"
        if release >= (0, 6, 0):
            out.append(Finding("actor.ppo_mini_batch_size", f"{mini} is more than data.train_batch_size ({train})",
                               "verl refuses this at start (verl/workers/config/actor.py, ActorConfig.validate): "
                               + change))
        elif release >= (0, 3, 0):
            out.append(Finding("actor.ppo_mini_batch_size", f"{mini} is more than data.train_batch_size ({train})",
                               "verl refuses this at start (verl/trainer/ppo/ray_trainer.py, "
                               "RayPPOTrainer._validate_config): " + change))
        else:
            out.append(Finding("actor.ppo_mini_batch_size", (
                f"{mini} is more than data.train_batch_size ({train}): verl {value.lock.release} checks nothing "
                "and takes each step's whole batch as one mini-batch"), None, "warning"))
    elif train % mini:
        out.append(Finding("actor.ppo_mini_batch_size", f"{mini} does not divide data.train_batch_size ({train})",
                           "the last mini-batch of each step is smaller", "warning"))
    if spec.actor.strategy != "megatron":
        # verl/utils/config.py validate_config: real_train_batch_size % minimal_bsz.
        if (train * n) % n_gpus:
            out.append(Finding("data.train_batch_size",
                               f"{train} prompts x rollout.n {n} = {train * n} sequences do not split over the {n_gpus} GPUs",
                               "verl refuses this at start (verl/utils/config.py, validate_config)"))
        micro = _int(value("actor.ppo_micro_batch_size_per_gpu"))
        if micro and (mini * n) % n_gpus == 0 and ((mini * n) // n_gpus) % micro:
            out.append(Finding("actor.ppo_micro_batch_size_per_gpu",
                               f"{micro} does not divide the {(mini * n) // n_gpus} sequences each GPU gets per mini-batch",
                               "verl's FSDP worker asserts this when it builds the actor", "warning"))
    if spec.algorithm.adv_estimator in GROUP_ESTIMATORS and n < 2:
        # verl/trainer/ppo/core_algos.py: a group of one gets baseline 0 (and std 1), so its advantage
        # is the raw score -- training happens, without the comparison the estimator is for.
        out.append(Finding("rollout.n", f"{spec.algorithm.adv_estimator} compares responses to the same prompt; with "
                           f"n = {n} each group is one response, and verl takes its raw score as the advantage "
                           "(no group baseline)", "set rollout.n, e.g. 8", "warning"))
    return out


def _parallel_layout(spec: Spec, value: Effective) -> list[Finding]:
    out: list[Finding] = []
    per_node = _int(value("resources.trainer_gpus_per_node")) or 1
    world = (_int(value("resources.nodes")) or 1) * per_node
    for role in ("actor", "ref", "critic"):
        section = getattr(spec, role)
        if section.megatron is not None and spec.actor.strategy != "megatron" and getattr(section, "strategy", None) != "megatron":
            out.append(Finding(f"{role}.megatron", "a Megatron layout needs actor.strategy = \"megatron\"",
                               f"remove [{role}.megatron] or switch the strategy"))
    if spec.actor.strategy == "megatron":
        tp = _int(value("actor.megatron.tensor_parallel")) or 1
        pp = _int(value("actor.megatron.pipeline_parallel")) or 1
        cp = _int(value("actor.megatron.context_parallel")) or 1
        ep = _int(value("actor.megatron.expert_parallel")) or 1
        etp = _int(value("actor.megatron.expert_tensor_parallel")) or tp
        if world % (tp * pp * cp):
            # verl/utils/config.py validate_config; megatron/core/parallel_state.py initialize_model_parallel.
            out.append(Finding("actor.megatron",
                               f"tensor x pipeline x context parallel = {tp * pp * cp} does not divide the {world} trainer GPUs",
                               "verl and Megatron refuse this at start (verl/utils/config.py validate_config; "
                               "megatron/core/parallel_state.py initialize_model_parallel)"))
        elif world % (etp * ep * pp):
            # megatron/core/parallel_state.py: the expert layout divides the
            # world by expert-tensor x expert x pipeline parallelism.
            out.append(Finding("actor.megatron.expert_parallel",
                               f"expert-tensor {etp} x expert {ep} x pipeline {pp} parallel = {etp * ep * pp} "
                               f"does not divide the {world} trainer GPUs",
                               "Megatron refuses this at start (megatron/core/parallel_state.py initialize_model_parallel)"))
        if tp > per_node:
            out.append(Finding("actor.megatron.tensor_parallel",
                               f"{tp} is more than the {per_node} GPUs of one node; tensor parallelism across nodes is slow",
                               None, "warning"))
    out += _rollout_engine(spec, value, world)
    return out


def _rollout_worker_file(release: tuple, strategy: str) -> str:
    """Where a release's actor-rollout worker builds its rollout device mesh."""
    if release >= (0, 8, 0):
        return "verl/workers/engine_workers.py"
    legacy = "verl/workers/megatron_workers.py" if strategy == "megatron" else "verl/workers/fsdp_workers.py"
    return f"{legacy}, or verl/workers/engine_workers.py" if release >= (0, 7, 0) else legacy


def _rollout_extra_overrides(spec: Spec) -> dict[str, int] | None:
    """The rollout sizes ``[verl] extra_overrides`` set, by verl's key name; None when
    one is set to what is not a whole number (an interpolation, a deletion)."""
    if not spec.verl.extra_overrides:
        return {}
    from tutorrl.compiler.pipeline.raw_overrides import OVERRIDE  # the one reading of an override's prefix, key and value

    found: dict[str, int] = {}
    for text in spec.verl.extra_overrides:
        match = OVERRIDE.match(text)
        prefix = "actor_rollout_ref.rollout."
        if not match or not match.group(2).startswith(prefix):
            continue
        name = match.group(2)[len(prefix):]
        if name not in ("tensor_model_parallel_size", "data_parallel_size", "pipeline_model_parallel_size"):
            continue
        raw = (match.group(3) or "").strip()
        if match.group(1) == "~" or not raw.isdigit() or int(raw) < 1:
            return None
        found[name] = int(raw)
    return found


def _rollout_engine(spec: Spec, value: Effective, world: int) -> list[Finding]:
    # Every release's hybrid actor-rollout worker asserts, while it builds the rollout
    # device mesh, that one engine's GPUs divide the trainer's:
    #   assert self.world_size % infer_world_size == 0   ("rollout world_size: ... is not divisible by ...")
    # with infer_world_size = tensor x data x pipeline parallel from verl 0.6.0, the
    # tensor-parallel size alone before (verl 0.2/0.3's Megatron worker excepted).
    # So a size that does not divide is a launch verl refuses at start, not a
    # style choice: an error, citing the code. The rollout's pipeline size is not a
    # spec field; verl's default (1) is taken.
    release = release_tuple(value.lock.release)
    extra = _rollout_extra_overrides(spec)
    if extra is None:
        return []  # an extra override sets a size this check cannot read: verl judges it
    tp = extra.get("tensor_model_parallel_size") or _int(value("rollout.tensor_parallel"))
    if not tp:
        return []
    dp = (extra.get("data_parallel_size") or _int(value("rollout.data_parallel")) or 1) if release >= (0, 6, 0) else 1
    if release >= (0, 6, 0):
        dp *= extra.get("pipeline_model_parallel_size") or 1
    engine = tp * dp
    if world % engine == 0:
        return []
    if spec.actor.strategy == "megatron" and release < (0, 4, 0):
        # verl 0.2/0.3's Megatron worker builds its rollout without that assertion.
        return [Finding("rollout.tensor_parallel",
                        f"{tp} does not divide the {world} trainer GPUs, so engines cannot tile them",
                        "verl's FSDP workers refuse this at start; its Megatron worker of this release does not check",
                        "warning")]
    gpus = f"{world} trainer GPU" + ("" if world == 1 else "s")
    if extra:
        what = (f"the rollout engine's {engine} GPUs ({', '.join(f'{k} {v}' for k, v in sorted(extra.items()))} "
                f"in verl.extra_overrides) do not divide the {gpus}")
    elif spec.rollout.tensor_parallel is None:
        size = f"verl's default tensor_model_parallel_size {tp}"
        if dp > 1:
            size += f" x data-parallel {dp}"
        what = f"{size} (rollout.tensor_parallel is not set) does not divide the {gpus}"
    elif dp > 1:
        what = f"tensor-parallel {tp} x data-parallel {dp} = {engine} GPUs per engine does not divide the {gpus}"
    else:
        what = f"{tp} does not divide the {gpus}"
    cite = (f"verl {value.lock.release}'s actor-rollout worker asserts world_size % engine size == 0 when it builds "
            f"the rollout ({_rollout_worker_file(release, spec.actor.strategy)})")
    if engine > world and release >= (0, 7, 0):
        # Past that assertion verl would still build world_size // engine size = 0
        # servers (agent_loop.py in 0.7, workers/rollout/llm_server.py from 0.8.0).
        where = ("verl/workers/rollout/llm_server.py" if release >= (0, 8, 0)
                 else "verl/experimental/agent_loop/agent_loop.py")
        cite += f", and it would build {world} // {engine} = 0 rollout engines ({where})"
    divisors = [d for d in range(1, world + 1) if world % d == 0 and d % dp == 0]
    sizes = ", ".join(str(d // dp) for d in divisors[:6]) + (", ..." if len(divisors) > 6 else "")
    return [Finding("verl.extra_overrides" if extra else "rollout.tensor_parallel", f"{what}; {cite}",
                    f"set rollout.tensor_parallel to one of {sizes}" if sizes
                    else "make rollout.tensor_parallel x rollout.data_parallel divide the trainer GPUs")]


_NOSET = "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"


def _reward(spec: Spec) -> list[Finding]:
    out: list[Finding] = []
    r = spec.reward
    if (spec.resources.reward_gpus or 0) > 0 and _NOSET not in spec.env.set:
        # verl asks Ray for no GPUs on its reward workers, and Ray then hides
        # every GPU from them: the GPUs set aside would be invisible.
        out.append(Finding("resources.reward_gpus",
                           f"{spec.resources.reward_gpus} GPU(s) are set aside for the reward, but Ray hides GPUs from "
                           "verl's reward workers", f"set env.set.{_NOSET} = \"1\" (a reward plug-in may do it)",
                           "warning"))
    if r.module is not None and r.path is not None:
        out.append(Finding("reward.path", "reward.module and reward.path both name the reward's code",
                           "keep one: a module installed where the job runs, or a file"))
    if r.options is not None and r.plugin is None:
        out.append(Finding("reward.options", "options are for a reward plug-in, and reward.plugin is not set", None))
    if r.kwargs is not None and r.module is None and r.path is None and r.plugin is None:
        out.append(Finding("reward.kwargs", "keyword arguments without a reward function to receive them",
                           "set reward.module (or reward.path)", "warning"))
    return out


def _env(spec: Spec) -> list[Finding]:
    out: list[Finding] = []
    seen: set[str] = set()
    for index, name in enumerate(spec.env.passthrough):
        key = f"env.passthrough.{index}"
        if name in seen:
            out.append(Finding(key, f"{name} is listed twice"))
        seen.add(name)
        if name in spec.env.set:
            out.append(Finding(f"env.set.{name}", f"{name} is passed through and must not also have a literal value",
                               "remove it from env.set"))
        if name.startswith(RESERVED_ENV_PREFIX):
            out.append(Finding(key, f"{RESERVED_ENV_PREFIX}* names are set by tutorrl itself"))
    allowed = set(spec.env.allow)
    for where, names in (("env.set", list(spec.env.set)), ("env.passthrough", spec.env.passthrough)):
        for index, name in enumerate(names):
            key = f"{where}.{name}" if where == "env.set" else f"{where}.{index}"
            if name in _BASH_OWNED:
                out.append(Finding(key, f"{name} belongs to bash: the launch script cannot set it", None))
            elif takes_over(name) and name not in allowed:
                out.append(Finding(key, f"{name} changes which program or code the launch runs",
                                   f"if that is the intent, add \"{name}\" to env.allow so a reviewer sees it"))
    out += _worker_env(spec, allowed)
    for name in spec.env.set:
        if name.startswith(RESERVED_ENV_PREFIX):
            out.append(Finding(f"env.set.{name}", f"{RESERVED_ENV_PREFIX}* names are set by tutorrl itself"))
        elif looks_secret(name) and name not in seen:
            out.append(Finding(f"env.set.{name}", f"{name} looks like a secret and would be written into the bundle",
                               "list it in env.passthrough instead; its value is then read from your environment at run time"))
    return out


# verl hands ray_kwargs.ray_init to ray.init whole (verl/trainer/main_ppo.py,
# run_ppo; the key map's pass-through), so an override under its
# runtime_env.env_vars sets the environment of every Ray worker, as [env] set
# does: `+ray_kwargs.ray_init.runtime_env.env_vars.LD_PRELOAD=...` compiled
# without env.allow. Every other runtime_env key, and a whole table above
# them, is raw_overrides.py's screen.


def _worker_env(spec: Spec, allowed: set[str]) -> list[Finding]:
    """Raw overrides (``[verl] extra_overrides``, ``unread_overrides``: a fork may read the latter) that set a
    worker's environment, under [env] set's name rules."""
    if not spec.verl.extra_overrides and not spec.verl.unread_overrides:
        return []
    from tutorrl.compiler.pipeline.raw_overrides import OVERRIDE, RAY_INIT, RUNTIME_ENV, WORKER_ENV

    bases = tuple(f"{base}.{RUNTIME_ENV}.{WORKER_ENV}" for base in RAY_INIT)
    out: list[Finding] = []
    raw = [(f"verl.extra_overrides.{i}", t) for i, t in enumerate(spec.verl.extra_overrides)]
    raw += [(f"verl.unread_overrides.{i}", t) for i, t in enumerate(spec.verl.unread_overrides)]
    for where, text in raw:
        match = OVERRIDE.match(text)
        if not match or match.group(1) == "~":
            continue  # not an override (resolve says so), or a deletion, which sets nothing
        key = match.group(2)
        for base in bases:
            if key.startswith(base + "."):
                name = key[len(base) + 1:]
                if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                    out.append(Finding(where, f"{name!r} is not an environment variable name (letters, digits, "
                                       f"'_'), which {base} holds"))
                elif name.startswith(RESERVED_ENV_PREFIX):
                    out.append(Finding(where, f"{RESERVED_ENV_PREFIX}* names are set by tutorrl itself"))
                elif takes_over(name) and name not in allowed:
                    out.append(Finding(where, f"{name} set in every Ray worker's environment changes which program "
                                       "or code runs there", f"if that is the intent, add \"{name}\" to env.allow "
                                       "so a reviewer sees it"))
                elif looks_secret(name):
                    out.append(Finding(where, f"{name} looks like a secret and would be written into the bundle",
                                       "list it in env.passthrough instead; its value is then read from your "
                                       "environment at run time"))
    return out


# The first release whose Tracking accepts a logger added after 0.2.0.post2
# (console, wandb, mlflow and swanlab are in every release tutorrl knows):
# verl asserts every backend is in `supported_backend` (verl/utils/tracking.py)
# when the trainer starts, so an earlier release refuses the run after its Ray
# start-up.
LOGGERS_SINCE = {
    "vemlp_wandb": "0.3.0.post0", "tensorboard": "0.3.0.post0", "clearml": "0.4.0",
    "trackio": "0.6.0", "file": "0.6.0", "rl_insight": "0.9.0",
}


def _trainer(spec: Spec, value: Effective) -> list[Finding]:
    out: list[Finding] = []
    loggers = value("trainer.loggers")
    loggers = [loggers] if isinstance(loggers, str) else loggers
    release = release_tuple(value.lock.release)
    for name in spec.trainer.loggers if isinstance(spec.trainer.loggers, list) else [spec.trainer.loggers]:
        since = LOGGERS_SINCE.get(name) if isinstance(name, str) else None
        if since is not None and release < release_tuple(since):
            out.append(Finding("trainer.loggers", f"the {name!r} logger exists from verl {since} (the backends "
                               f"verl/utils/tracking.py accepts); this spec targets {value.lock.release}",
                               f"target verl >= {since}, or drop {name!r}"))
    if isinstance(loggers, list) and "wandb" in loggers and "WANDB_API_KEY" not in spec.env.passthrough \
            and "WANDB_MODE" not in spec.env.set:
        how = "trainer.loggers includes" if spec.trainer.loggers else "verl's default trainer.loggers includes"
        out.append(Finding("trainer.loggers", f"{how} wandb, which fails without an account",
                           "pass WANDB_API_KEY through (env.passthrough), or set trainer.loggers = [\"console\"]",
                           "warning"))
    for name in ("save_freq", "test_freq"):
        if getattr(spec.trainer, name) == 0:
            out.append(Finding(f"trainer.{name}", "0 means never in verl", "-1 says never plainly", "warning"))
    loggers = spec.trainer.loggers or []
    if isinstance(loggers, list) and len(set(loggers)) != len(loggers):
        out.append(Finding("trainer.loggers", "a logger is listed twice", None, "warning"))
    if spec.trainer.resume_from is not None and spec.trainer.resume_mode not in (None, "resume_path"):
        out.append(Finding("trainer.resume_from", "verl reads resume_from only with resume_mode = \"resume_path\"",
                           "set trainer.resume_mode = \"resume_path\"", "warning"))
    return out
