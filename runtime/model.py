"""`tutorrl model BUNDLE --out DIR`: a loadable Hugging Face folder from a recorded checkpoint.

verl saves FSDP shards (or Megatron's distributed checkpoint) and an
``actor/huggingface/`` folder with the config and tokenizer but no weights;
verl's own model merger (``python -m verl.model_merger merge``, from verl
0.4.0) turns them into a model. This runs it for the run's release, in the
run's environment (the job's Python, as ``tutorrl run`` picks it), on a
checkpoint whose record verifies and whose files hash as recorded
(``evidence.source_checkpoint``), into a temporary folder beside DIR that is
renamed to DIR only once it is whole and hashed; then the model's record is
appended to the bundle, linked to the checkpoint's (``evidence.record_model``).

LoRA: verl's merger writes the adapter to ``lora_adapter/`` and the base
weights beside it. verl 0.5.0's merger writes the adapter's ``lora_alpha`` as
0 (it does not know it); the trained value is then taken from the adapter
verl 0.5.0's worker saved beside the actor shards (``actor/lora_adapter/``)
or from verl 0.9's ``actor/lora_train_meta.json``. ``--merge-lora`` merges
the adapter into the weights with peft in the job's Python. No LoRA run fits
this project's CPU test machine: that path is tested against the layouts
those releases document (tests/evidence/test_model_command.py), not on a
trained LoRA checkpoint.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

from tutorrl.errors import MergerFailed, RefusedError

# Asked of the job's Python without importing verl (seconds, and torch): its release, and whether
# the package ships the merger module (verl before 0.4 had scripts/model_merger.py in its source tree);
# and the LoRA merge (peft). Run in the job's Python, by its path (it may have no tutorrl):
# runtime/job_probe.py's merger and merge-lora roles.
_JOB_PROBE = Path(__file__).with_name("job_probe.py")

ADAPTER = "lora_adapter"
# Where a checkpoint keeps the trained LoRA settings: verl 0.5.0's worker saves the adapter with its
# peft config beside the actor shards; verl 0.9 writes rank and alpha to lora_train_meta.json.
LORA_SOURCES = ("actor/lora_adapter/adapter_config.json", "actor/lora_train_meta.json")


def _say(text: str) -> None:
    from tutorrl._text import printable

    print(printable(f"model: {text}"), file=sys.stderr, flush=True)


def job_python_of(bundle_path: Path, given: str | None) -> tuple[str, dict[str, str]]:
    """(the Python to run the merger with, its environment): ``--python``, else the job's (TUTORRL_PYTHON in
    this environment or the bundle's runtime_env, else tutorrl's own), as ``tutorrl run`` chooses it."""
    from tutorrl.compiler import verify_bundle
    from tutorrl.runtime import preflight

    env = preflight.job_environment(verify_bundle(bundle_path, trust_digests=True).job)
    if given:
        return (shutil.which(given) or given), env
    return preflight.job_python(env), env


def probe(python: str, env: dict[str, str]) -> dict:
    try:
        proc = subprocess.run([python, str(_JOB_PROBE), "merger"], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=120)
    except FileNotFoundError:
        raise RefusedError(f"the job's Python {python} does not exist (TUTORRL_PYTHON, or --python)") from None
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RefusedError(f"the job's Python {python} could not be asked for verl: {exc}") from None
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RefusedError(f"the job's Python {python} could not be asked for verl: "
                           f"{(proc.stderr or proc.stdout).strip()[-500:]}") from None


def check_merger(found: dict, python: str, release: str) -> None:
    """Refuse an environment that is not the run's release, or whose verl has no merger module."""
    if found.get("verl") is None:
        raise RefusedError(f"verl is not installed for {python}; the bundle's run used verl {release} (name the "
                           "training environment's Python with TUTORRL_PYTHON or --python)")
    if found["verl"] != release:
        raise RefusedError(f"verl {found['verl']} is installed for {python}, but the bundle's run used verl "
                           f"{release}: its merger is the one that reads these checkpoints (name that environment's "
                           "Python with TUTORRL_PYTHON or --python)")
    if not found.get("merger"):
        raise RefusedError(f"verl {release} has no `verl.model_merger` module (it arrived in verl 0.4.0; older "
                           "releases keep a scripts/model_merger.py in their source tree, which tutorrl does not "
                           "run): merge this checkpoint by hand with that script")


def lora_expected(names: list[str]) -> bool:
    """Whether a checkpoint's recorded files show a LoRA run (the layouts in LORA_SOURCES)."""
    return any(name in LORA_SOURCES or name.startswith("actor/lora_adapter/") for name in names)


def fix_lora_alpha(merged: Path, checkpoint: Path) -> str | None:
    """When the merger wrote lora_alpha 0 (verl 0.5.0 always does), put the trained value in its place from
    the checkpoint's own LORA_SOURCES; returns where it came from (None: unchanged). 0 left means unknown."""
    config_path = merged / ADAPTER / "adapter_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    if config.get("lora_alpha"):
        return None
    for name in LORA_SOURCES:
        try:
            alpha = json.loads((checkpoint / name).read_text(encoding="utf-8")).get("lora_alpha")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(alpha, (int, float)) and alpha > 0:
            config["lora_alpha"] = alpha
            config_path.write_text(json.dumps(config, indent=4, ensure_ascii=False), encoding="utf-8")
            return name
    return None


def _run(cmd: list[str], env: dict[str, str], what: str) -> float:
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    except OSError as exc:
        raise MergerFailed(f"{what} could not start: {exc}") from None
    if proc.returncode != 0:
        tail = "\n  ".join((proc.stderr or proc.stdout).strip().splitlines()[-30:])
        raise MergerFailed(f"{what} failed (exit {proc.returncode}); nothing was written:\n  {tail}")
    return time.monotonic() - started


def make_model(bundle: str, out: str, *, step: int | None = None, merge_lora: bool = False,
               python: str | None = None, workers: int | None = None) -> tuple[Path, Path]:
    """Merge, hash, rename into place and record; returns (DIR, the model's record)."""
    from tutorrl import evidence

    target = Path(os.path.abspath(out))
    problem = evidence.model_dir_problem(target)
    if problem:
        raise RefusedError(problem)
    source = evidence.source_checkpoint(Path(bundle), step, workers=workers)
    ck = source.statement.predicate.checkpoint
    names = [r.name for r in ck.files.resources]
    lora = lora_expected(names)
    if merge_lora and not lora:
        raise RefusedError(f"--merge-lora: step {ck.step}'s checkpoint ({source.record.name}) is not a LoRA one "
                           f"(none of {', '.join(LORA_SOURCES)} was recorded)")
    backend = source.backend()
    interpreter, env = job_python_of(source.bundle_path, python)
    check_merger(probe(interpreter, env), interpreter, source.verl)
    # Before minutes of merging: a configured key that cannot sign fails now.
    signer = evidence.find_signer()
    cmd = [interpreter, "-m", "verl.model_merger", "merge", "--backend", backend,
           "--local_dir", str(source.folder / "actor")]
    if backend == "megatron" and _ties_embeddings(source.folder):
        cmd.append("--tie-word-embedding")
    tmp = target.parent / f".{target.name}.tutorrl-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    spare = tmp.with_name(tmp.name + "-merged")
    _say(f"merging {ck.directory} ({source.record.name}) with verl {source.verl}'s verl.model_merger "
         f"(--backend {backend}) in {interpreter}")
    try:
        seconds = _run(cmd + ["--target_dir", str(tmp)], env, f"verl {source.verl}'s model merger")
        has_adapter = (tmp / ADAPTER / "adapter_config.json").is_file()
        alpha_from = fix_lora_alpha(tmp, source.folder) if has_adapter else None
        if merge_lora:
            if not has_adapter:
                raise MergerFailed(f"--merge-lora: the merger wrote no {ADAPTER}/ for {ck.directory}; nothing "
                                   "was written")
            if not json.loads((tmp / ADAPTER / "adapter_config.json").read_text()).get("lora_alpha"):
                raise RefusedError(f"--merge-lora: the adapter's lora_alpha is 0 and the checkpoint records no "
                                   f"trained value ({', '.join(LORA_SOURCES)}): merging would give the base "
                                   "model; merge by hand with the alpha the run used")
            seconds += _run([interpreter, str(_JOB_PROBE), "merge-lora", str(tmp), str(spare)], env,
                            "merging the LoRA adapter")
            shutil.move(str(tmp / ADAPTER), str(spare / ADAPTER))
            shutil.rmtree(tmp)
            spare.rename(tmp)
        merge = evidence.Merge(merger="verl.model_merger", backend=backend, verl=source.verl,  # type: ignore[arg-type]
                               lora_adapter=has_adapter, lora_merged=merge_lora, lora_alpha_from=alpha_from)
        hashed = evidence.inspect_model(tmp, workers=workers)
        problem = evidence.model_dir_problem(target)
        if problem:  # made meanwhile by someone else: theirs, left alone
            raise RefusedError(problem)
        tmp.rename(target)
    finally:
        for leftover in (tmp, spare):
            if leftover.exists():
                shutil.rmtree(leftover, ignore_errors=True)
    try:
        record = evidence.record_model(source, target, merge, hashed=hashed, signer=signer)
    except BaseException:
        # Unrecorded, the folder would be a model no evidence vouches for: nothing is left half-done.
        shutil.rmtree(target, ignore_errors=True)
        raise
    # verl's merger writes bfloat16 whatever the run trained in: said, so nobody compares in float32 unawares.
    dtypes = sorted({t.dtype for st in hashed[0].safetensors for t in st.tensors})
    _say(f"verl's merger took {seconds:.1f} s; wrote {target} ({len(hashed[0].files.resources)} files, "
         f"weights in {', '.join(dtypes) or 'no safetensors'}"
         + (", LoRA adapter in lora_adapter/" + (", merged into the weights" if merge_lora else "")
            if has_adapter else "") + ")")
    return target, record


def _ties_embeddings(folder: Path) -> bool:
    try:
        config = json.loads((folder / "actor" / "huggingface" / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return bool(isinstance(config, dict) and config.get("tie_word_embeddings"))
