"""The record of a model made from a recorded checkpoint (`tutorrl model`, runtime/model.py).

Two halves around the merger, which runs in another environment:

- before it, `source_checkpoint` picks the checkpoint's record (the newest
  step, or the one asked for), requires the chain to verify and the record not
  to have failed, and hashes the checkpoint's files again: the merger must
  read what was recorded, so a file changed since is a refusal naming it;
- after it, `record_model` hashes the merged folder (every file, and each
  tensor of its safetensors files, as a checkpoint's export is hashed) and
  appends a record whose subjects are those files and whose lineage links the
  checkpoint record (`schema.Lineage`, checked by `verify` as a resumed run's
  link is).

A model record is a checkpoint record in shape (`checkpoint` describes the
merged folder, named relative to the bundle), with `run.source`
"model-merger" and `model` saying how it was made; readers that look for a
run's checkpoints skip it (`is_model_record`).
"""

from __future__ import annotations

from typing import Literal


import os
from datetime import datetime, timezone
from pathlib import Path

import msgspec

from tutorrl.errors import CheckpointError
from tutorrl.evidence.schema import (
    MODEL_LINK_CHECK, BundleRef, ChainLink, Check, CheckpointInfo, Lineage, Merge, Predicate,
    ResourceDescriptor, RunInfo,
    SafetensorsDigests, Statement, TensorDigest, Tracker, make_verdict,
)

from tutorrl.contract import EVIDENCE_DIR  # noqa: E402

SOURCE: Literal["model-merger"] = "model-merger"  # the record schema's MODEL_SOURCE
LINK_CHECK = MODEL_LINK_CHECK


def is_model_record(s: Statement) -> bool:
    return s.predicate.run.source == SOURCE


class Source(msgspec.Struct, frozen=True):
    """The checkpoint a model is made from, as its record gives it and as hashed again now."""

    bundle_path: Path
    bundle_digest: str
    verl: str
    record: Path
    statement: Statement
    # The global_step_N folder on disk.
    folder: Path
    # Its files root as hashed now (equal to the record's, or `source_checkpoint` refused).
    files_root: str

    @property
    def step(self) -> int:
        return self.statement.predicate.checkpoint.step

    def backend(self) -> str:
        """verl's merger backend for the actor's layout as the record gives it; refused when unknown."""
        layouts = {r.layout for r in self.statement.predicate.checkpoint.roles if r.role == "actor"}
        if layouts == {"fsdp"}:
            return "fsdp"
        if layouts and layouts <= {"megatron-v1", "megatron-v2"}:
            return "megatron"
        raise CheckpointError(f"{self.record.name}: the actor's layout in {self.folder} is "
                              f"{', '.join(sorted(layouts)) or 'not recorded'}; verl's model merger reads FSDP or "
                              "Megatron checkpoints only")


def source_checkpoint(bundle_path: Path, step: int | None = None, *, workers: int | None = None) -> Source:
    """The record of the checkpoint to merge, verified and re-hashed; CheckpointError (exit 2) naming why not."""
    from tutorrl.evidence.bundle import load_bundle
    from tutorrl.evidence.paths import recorded_root
    from tutorrl.evidence.record import read_records
    from tutorrl.evidence.verify import check_evidence

    bundle = load_bundle(Path(bundle_path))
    report = check_evidence(bundle.path, bundle.digest)
    if report.problems:
        raise CheckpointError(f"{bundle.path}: its evidence does not verify, so no checkpoint of it is taken as "
                              "recorded:\n  " + "\n  ".join(report.problems))
    records = [(p, s) for p, s in read_records(bundle.path) if s is not None and not is_model_record(s)
               and s.predicate.checkpoint.directory == f"global_step_{s.predicate.checkpoint.step}"]
    if not records:
        raise CheckpointError(f"{bundle.path}: no checkpoint is recorded in its evidence (run it first: "
                              "`tutorrl run`; or record one by hand: `tutorrl evidence --add`)")
    steps = sorted({s.predicate.checkpoint.step for _, s in records})
    wanted = steps[-1] if step is None else step
    chosen = [(p, s) for p, s in records if s.predicate.checkpoint.step == wanted]
    if not chosen:
        raise CheckpointError(f"{bundle.path}: no record of step {wanted}; recorded steps: "
                              f"{', '.join(map(str, steps))}")
    path, statement = chosen[-1]  # a step recorded again (`evidence --add`) is taken as last recorded
    ck = statement.predicate.checkpoint
    if statement.predicate.verdict.status == "fail":
        failed = ", ".join(c.id for c in statement.predicate.verdict.checks if c.status == "fail")
        raise CheckpointError(f"{path.name} (step {ck.step}) failed its checks ({failed}): not merged "
                              f"(`tutorrl evidence {bundle.path}` says why)")
    folder = recorded_root(ck.root, bundle.path) / ck.directory
    if not folder.is_dir():
        raise CheckpointError(f"{path.name} (step {ck.step}): its checkpoint {folder} is no longer on disk")
    files_root, problems = rehash_folder(folder, ck, workers=workers)
    if problems:
        raise CheckpointError(f"{path.name} (step {ck.step}): {folder} is not what was recorded, so the merger "
                              "would not read the recorded checkpoint:\n  " + "\n  ".join(problems))
    return Source(bundle_path=bundle.path, bundle_digest=bundle.digest, verl=bundle.verl, record=path,
                  statement=statement, folder=folder, files_root=files_root)


def rehash_folder(folder: Path, ck: CheckpointInfo, *, workers: int | None = None) -> tuple[str, list[str]]:
    """(files root hashed now, each file that differs from ``ck``'s manifest)."""
    from tutorrl.evidence.hashing import Job, build_manifest, default_workers, hash_jobs, list_files

    files, odd = list_files(folder)
    recorded = {r.name: r for r in ck.files.resources}
    now = {rel for rel, _, _ in files}
    problems = [f"{folder / rel}: missing (recorded, now gone)" for rel in sorted(set(recorded) - now)]
    problems += [f"{folder / rel}: not in the record (added since)" for rel in sorted(now - set(recorded))]
    problems += [f"{folder}/{name}: not a regular file" for name in odd]
    try:
        digests = hash_jobs([Job(p, ((rel, 0, size),)) for rel, p, size in files],
                            workers=workers or default_workers())
    except OSError as exc:
        raise CheckpointError(f"{folder}: {exc}") from None
    for rel, p, size in files:
        if rel in recorded and (size != recorded[rel].size or digests[rel] != recorded[rel].digest):
            problems.append(f"{p}: content changed (sha256 {digests[rel][:16]}..., recorded "
                            f"{recorded[rel].digest[:16]}...)")
    return build_manifest(files, digests).root, problems


def inspect_model(folder: Path, *, workers: int | None = None):
    """(CheckpointInfo of the merged folder, its checks, its subjects): every file and each safetensors tensor."""
    from tutorrl.evidence.hashing import Job, build_manifest, default_workers, hash_jobs, list_files
    from tutorrl.evidence.record import _safetensors_plan
    from tutorrl.evidence.statement import canonical, digest

    files, odd = list_files(folder)
    if odd:
        raise CheckpointError(f"{folder}: the merger left files a record cannot cover: {', '.join(odd[:5])}")
    if not files:
        raise CheckpointError(f"{folder}: the merger wrote nothing")
    headers, tensor_jobs, checks = _safetensors_plan(folder, files)
    if not headers:  # a checkpoint may have no export; a merged model without weights is no model
        checks = [Check(id="export.safetensors", status="fail", detail="the merged folder holds no safetensors "
                        "weights")] + [c for c in checks if c.id != "export.safetensors"]
    jobs = [Job(p, ((f"f\0{rel}", 0, size),)) for rel, p, size in files] + tensor_jobs
    try:
        digests = hash_jobs(jobs, workers=workers or default_workers())
    except OSError as exc:
        raise CheckpointError(f"{folder}: {exc}") from None
    manifest = build_manifest(files, {rel: digests[f"f\0{rel}"] for rel, _, _ in files})
    st = []
    for rel, (_path, header) in sorted(headers.items()):
        tensors = [TensorDigest(name=t.name, dtype=t.dtype, shape=list(t.shape), sha256=digests[f"t\0{rel}\0{t.name}"])
                   for t in header.tensors]
        st.append(SafetensorsDigests(file=rel, tensor_count=len(tensors),
                                     tensor_bytes=sum(t.nbytes for t in header.tensors),
                                     tensors_digest=digest(canonical(tensors)), tensors=tensors))
    info = CheckpointInfo(root=str(folder.parent), directory=folder.name, step=0, tracker=Tracker(present=False),
                          roles=[], files=manifest, safetensors=st)
    return info, checks


def record_model(source: Source, folder: Path, merge: Merge, *, hashed=None, signer=None) -> Path:
    """Append the record of ``folder`` (the merged model, in place) to ``source``'s bundle; returns its path.

    ``hashed``: ``inspect_model``'s answer for the folder's content (hashed before it was renamed into
    place), else it is hashed now. ``signer``: found by the caller before the merger ran (a key that is
    there but unusable fails before minutes of merging)."""
    from tutorrl import __version__
    from tutorrl.evidence.chain import append
    from tutorrl.evidence.lineage import _sha256
    from tutorrl.evidence.paths import relative_to_bundle
    from tutorrl.evidence.sign import find_signer

    if signer is None:
        signer = find_signer()
    info, checks = hashed if hashed is not None else inspect_model(folder)
    bundle = source.bundle_path
    ck = source.statement.predicate.checkpoint
    info = msgspec.structs.replace(info, root=relative_to_bundle(folder.parent, bundle), directory=folder.name,
                                   step=ck.step)
    record_digest = _sha256(source.record)
    lineage = Lineage(step=ck.step, directory=ck.directory, files_root=source.files_root,
                      bundle=source.bundle_digest, record=source.record.name, record_digest=record_digest,
                      bundle_path=relative_to_bundle(bundle, bundle))
    how = f"verl {merge.verl}'s {merge.merger} --backend {merge.backend}"
    checks = [Check(id=LINK_CHECK, status="pass",
                    detail=f"merged by {how} from {ck.directory}, recorded as {source.record.name}; its files were "
                           "hashed again before the merge and matched that record")] + checks
    if merge.lora_adapter:
        checks.append(Check(id="model.lora", status="pass",
                            detail="the LoRA adapter is in lora_adapter/; the weights beside it are "
                                   + ("the base model with the adapter merged in" if merge.lora_merged
                                      else "the base model's (load them with the adapter: peft)")))
    run_before = source.statement.predicate.run
    run = RunInfo(run_id=run_before.run_id, source=SOURCE, finished=run_before.finished,
                  tutorrl_version=__version__, recorded_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    subject = [ResourceDescriptor(name=f"{folder.name}/{r.name}", digest={"sha256": r.digest})
               for r in info.files.resources]
    verdict = make_verdict(checks)

    def build(link: ChainLink) -> Statement:
        return Statement(subject=subject, predicate=Predicate(
            chain=link, bundle=BundleRef(digest=source.bundle_digest, verl=source.verl), run=run, checkpoint=info,
            publication=None, verdict=verdict, lineage=lineage, model=merge))

    return append(bundle / EVIDENCE_DIR, build, signers=[signer] if signer else [])


def model_dir_problem(out: Path) -> str | None:
    """Why ``out`` cannot be made (it exists; its folder is missing); None when it can."""
    if os.path.lexists(out):
        return f"{out}: already exists; `tutorrl model` writes a new folder (choose another --out, or remove it)"
    if not out.parent.is_dir():
        return f"{out.parent}: no such folder to write {out.name} in"
    return None
