"""The staleness gate: every spec's committed bundle is what the spec compiles to now.

A spec edited without recompiling would make the committed bundle -- the thing
reviewed -- a lie about what runs. A bundle no spec produces any more is a
leftover that confuses review. Both fail the gate, with the diff that explains
the staleness and the command that fixes it.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tutorrl._files import display_path
from tutorrl.compiler.bundle import CompiledBundle, recorded_still_true
from tutorrl.compiler.pipeline import compile_raw
from tutorrl.contract import APPENDED_DIRS, MANIFEST
from tutorrl.errors import TutorrlError
from tutorrl.review.model import Diff, diff_sides
from tutorrl.review.sides import Side, bundle_side, compiled_side

DEFAULT_SPECS = "specs"
DEFAULT_BUNDLES = "bundles"


@dataclass
class SpecResult:
    spec: str
    bundle: str  # where its bundle must be
    state: str  # "ok" | "missing" | "stale" (same launch, other sources) | "invalid" | "error"
    message: str = ""
    diff: Diff | None = None  # against the bundle it most likely replaces
    point: str = ""  # a sweep's point ("actor.lr=1e-06, rollout.n=4"); "" for a spec of one launch


@dataclass
class CheckReport:
    specs: list[SpecResult] = field(default_factory=list)
    orphans: list[tuple[str, str]] = field(default_factory=list)  # (bundle, what it was)
    bundle_errors: list[tuple[str, str]] = field(default_factory=list)
    fix: list[str] = field(default_factory=list)
    staged: bool = False  # read from the git index rather than the work tree

    @property
    def exit_code(self) -> int:
        if any(r.state == "error" for r in self.specs) or self.bundle_errors or any(
                r.state == "invalid" for r in self.specs):
            return 2
        if any(r.state != "ok" for r in self.specs) or self.orphans:
            return 1
        return 0


def _spec_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.toml")
                  if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts))


def _is_spec_path(root: Path, path: Path) -> bool:
    return path.suffix == ".toml" and not any(part.startswith(".") for part in path.relative_to(root).parts)


def _size(d: Diff) -> int:
    return (len(d.experiment) + len(d.resources) + len(d.reward) + len(d.environment)
            + len(d.extra_overrides) + len(d.unread_overrides) + len(d.spec_only) + (d.release is not None))


class _WorkTree:
    """Specs and bundles as they are on disk."""

    staged = False

    def __init__(self, specs: Path, bundles: Path):
        if not specs.is_dir():
            raise TutorrlError(f"{specs}: no such spec folder (give --specs)")
        self.specs_root, self.root = specs, bundles

    def specs(self) -> Iterator[tuple[str, bytes]]:
        # One at a time: a spec's bytes are not kept once it is compiled.
        return ((display_path(p), p.read_bytes()) for p in _spec_files(self.specs_root))

    def names(self) -> list[str]:
        if not self.root.is_dir():
            return []
        # Dot-folders are a compile in progress (write_bundle's temporary folder).
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))

    def has_manifest(self, name: str) -> bool:
        return (self.root / name / MANIFEST).exists()

    def side(self, name: str) -> Side:
        return bundle_side(self.root / name, display_path(self.root / name))

    def holds(self, name: str, compiled: CompiledBundle) -> bool:
        """Whether bundle folder ``name`` holds exactly ``compiled``'s files and nothing else.

        Then it is the bundle its spec compiles to now, byte for byte, which
        is what verifying it would prove by compiling its spec.toml a second
        time. Anything else -- a file more or less, a link, other bytes,
        appended runs/ or evidence/ (whose records verify_bundle inspects) --
        answers False, and the bundle is verified in full.
        """
        from tutorrl._read import ReadError, read_file

        folder = os.path.join(self.root, name)
        try:
            if os.path.islink(folder):
                return False
            with os.scandir(folder) as entries:
                present = {e.name for e in entries}
        except OSError:
            return False
        if present != compiled.files.keys():
            return False
        for file, data in compiled.files.items():
            try:
                # The bounded reader: no link, FIFO or device, never more than the expected bytes.
                if read_file(os.path.join(folder, file), len(data), name=file) != data:
                    return False
            except (OSError, ReadError):
                return False
        return True


class _Index:
    """Specs and bundles as staged in the git index: what `git commit` would record."""

    staged = True

    def __init__(self, specs: Path, bundles: Path):
        from tutorrl.review import gitindex

        gitindex.require_repository()
        self.git = gitindex
        self.specs_root, self.root = specs, bundles
        spec_entries = [e for e in gitindex.staged_entries(specs) if _is_spec_path(specs, Path(e.path))]
        if not spec_entries and not specs.is_dir():
            raise TutorrlError(f"{specs}: no such spec folder, and nothing staged under it (give --specs)")
        self._spec_entries = sorted(spec_entries, key=lambda e: e.path)
        self._specs: list[tuple[str, bytes]] | None = None
        self._bundles: dict[str, dict[str, gitindex.IndexEntry]] = {}
        for e in gitindex.staged_entries(bundles):
            rel = Path(e.path).relative_to(bundles)
            if len(rel.parts) > 1 and not rel.parts[0].startswith("."):
                self._bundles.setdefault(rel.parts[0], {})[str(Path(*rel.parts[1:]))] = e

    def specs(self) -> list[tuple[str, bytes]]:
        if self._specs is None:
            blobs = self.git.read_blobs([e.sha for e in self._spec_entries])
            self._specs = [(e.path, blobs[e.sha]) for e in self._spec_entries]
        return self._specs

    def names(self) -> list[str]:
        return sorted(self._bundles)

    def has_manifest(self, name: str) -> bool:
        return MANIFEST in self._bundles[name]

    def holds(self, name: str, compiled: CompiledBundle) -> bool:
        """Whether the bundle staged as ``name`` is exactly ``compiled``'s files, as regular
        files and nothing else: compared by git's object ids, no blob read."""
        entries = self._bundles.get(name, {})
        if entries.keys() != compiled.files.keys():
            return False
        return all(e.mode in self.git.REGULAR_MODES and e.sha == _git_object_id(compiled.files[rel], len(e.sha))
                   for rel, e in entries.items())

    def side(self, name: str) -> Side:
        """Verify the staged files exactly as the work-tree check would: write
        them to a private folder of the bundle's name and read it back."""
        import tempfile

        label = display_path(self.root / name)
        entries = self._bundles[name]
        odd = [f"{label}/{rel} is staged as {'a symlink' if e.mode == '120000' else 'a submodule'}, not a file"
               for rel, e in sorted(entries.items()) if e.mode not in self.git.REGULAR_MODES]
        if odd:
            raise TutorrlError("; ".join(odd))
        blobs = self.git.read_blobs([e.sha for e in entries.values()])
        with tempfile.TemporaryDirectory(prefix="tutorrl-staged-") as tmp:
            folder = Path(tmp) / name
            for rel, e in entries.items():
                target = folder / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(blobs[e.sha])
            try:
                return bundle_side(folder, f"{label} (staged)")
            except TutorrlError as exc:
                raise TutorrlError(exc.render().removeprefix("error: ").replace(str(folder), f"{label} (staged)")) \
                    from None


def _git_object_id(data: bytes, length: int) -> str | None:
    """The id git gives a blob of ``data`` (SHA-1, or SHA-256 in a repository of that format)."""
    import hashlib

    algorithm = {40: "sha1", 64: "sha256"}.get(length)
    if algorithm is None:
        return None
    return hashlib.new(algorithm, b"blob %d\0" % len(data) + data).hexdigest()


def _holds_bytes(path: Path, data: bytes) -> bool:
    from tutorrl._read import ReadError, read_file

    try:
        return read_file(str(path), len(data), name=path.name) == data
    except (OSError, ReadError):
        return False


def _records_in(folder: Path) -> list[str]:
    """The appended folders of a work-tree bundle that hold records."""
    return [d for d in APPENDED_DIRS if (folder / d).is_dir() and any((folder / d).iterdir())]


class _Advice:
    """The commands that fix a finding, with git where the folder is under git."""

    def __init__(self, tree, bundles_root: Path):
        from tutorrl.review.gitindex import tracked

        self.tree, self.root = tree, bundles_root
        self.tracked = tracked
        self.in_git = tree.staged or tracked(".") is not None
        shown = display_path(bundles_root)
        self.out_flag = "" if shown == DEFAULT_BUNDLES else f" --out {shlex.quote(shown)}"
        self._staged_specs: dict[str, bytes] | None = None
        self._tracked_bundles: set[str] | None = None

    def _tracked(self, folder: Path) -> bool:
        """Whether git tracks anything under a bundle folder: one `git ls-files` for all of them."""
        if folder.parent != self.root:
            return bool(self.tracked(folder))
        if self._tracked_bundles is None:
            from tutorrl.review.gitindex import tracked_children

            self._tracked_bundles = tracked_children(self.root) or set()
        return folder.name in self._tracked_bundles

    def compile_and_add(self, spec: str, folder: Path, *, rerecord: bool = False,
                        manifest: bytes | None = None) -> str:
        """``manifest``: the manifest the spec compiles to, where the bundle is there
        but its record differs; ``rerecord``: compile with --rerecord."""
        q, shown = shlex.quote(spec), shlex.quote(display_path(folder))
        flags = f"{self.out_flag}{' --rerecord' if rerecord else ''}"
        if self.tree.staged:
            on_disk = Path(spec)
            if self._staged_specs is None:
                self._staged_specs = dict(self.tree.specs())
            staged_bytes = self._staged_specs.get(spec)
            if on_disk.is_file() and staged_bytes is not None and on_disk.read_bytes() != staged_bytes:
                # The work tree holds another version of the spec than the index.
                return (f"git add {q} && git add \"$(tutorrl compile {q}{flags})\"   "
                        "(the spec on disk differs from the staged one; or restage the version you mean)")
            if (folder / MANIFEST).is_file() and (manifest is None or _holds_bytes(folder / MANIFEST, manifest)):
                return f"git add {shown}   (compiled, but not staged)"
        command = f"tutorrl compile {q}{flags}"
        return f"{command} && git add {shown}" if self.in_git else command

    def remove(self, folder: Path) -> str:
        shown = shlex.quote(display_path(folder))
        held = _records_in(folder)
        if held:
            kept = " and ".join(f"{d}/" for d in held)
            untrack = f"git rm -r -q --cached {shown} && " if self.in_git and self._tracked(folder) else ""
            return (f"keep {shown}: it holds the {kept} records of launches that ran, which deleting it would lose. "
                    f"Move it out of {display_path(self.root)}/ with its records: {untrack}mv {shown} ARCHIVE/ "
                    f"(any folder outside {display_path(self.root)}/; `tutorrl verify ARCHIVE/{folder.name}` "
                    "still checks it and its evidence), or restore a spec that compiles to it")
        if self.tree.staged or (self.in_git and self._tracked(folder)):
            return f"git rm -r -q {shown}"
        return f"rm -r {shown}"


def run_check(specs: str | Path = DEFAULT_SPECS, bundles: str | Path = DEFAULT_BUNDLES, *,
              staged: bool = False) -> CheckReport:
    """Compare specs with bundles: on disk, or (``staged``) as staged in the git index.

    Linear in the number of specs and bundles: the bundle folder is listed
    once, each spec is compiled once, and a bundle that holds exactly what its
    spec compiles to is accepted on that comparison (verifying it would
    compile its spec.toml again to prove the same bytes); any other bundle is
    verified in full.
    """
    specs_root, bundles_root = Path(specs), Path(bundles)
    tree = _Index(specs_root, bundles_root) if staged else _WorkTree(specs_root, bundles_root)
    advice = _Advice(tree, bundles_root)
    report = CheckReport(staged=staged)
    present = set(tree.names())
    # (spec, bundle id, its compiled bundle -- None once its bundle is found to hold exactly that):
    # a bundle is kept only while something is still to be done with it, not 10,000 of them at once.
    compiled: list[tuple[str, str, CompiledBundle | None, str]] = []
    # Staged, the index is read whole first (a chain is read from it); on disk
    # each spec names its bases as it is read, in the same pass as its compile.
    bases = _bases(tree) if tree.staged else _Bases(set(), None)
    for label, raw in tree.specs():
        if not tree.staged:
            bases.note(label, raw)
        try:
            launches = compile_raw(label, label, raw, read=bases.read)
        except TutorrlError as exc:
            report.specs.append(SpecResult(label, "", "error", exc.render()))
            continue
        for launch in launches:
            bundle = launch.bundle
            held = bundle.id in present and tree.holds(bundle.id, bundle)
            point = launch.point.label if launch.point is not None else ""
            compiled.append((label, bundle.id, None if held else bundle, point))
    # A partial base (it leaves what its children give) does not compile alone: it is
    # checked only through them, where a change to it is a change to each of their bundles.
    report.specs = [r for r in report.specs if not (r.state == "error" and os.path.normpath(r.spec) in bases)]
    wanted = {name for _, name, _, _ in compiled}

    # Orphans are read once: they are both reported and the likely "before"
    # of a stale spec.
    orphans: dict[str, list[Side]] = {}  # by experiment
    for name in sorted(present - wanted):
        folder = bundles_root / name
        if not tree.has_manifest(name):
            report.orphans.append((display_path(folder), "not a bundle (no manifest.json)"))
            report.fix.append(advice.remove(folder))
            continue
        try:
            side = tree.side(name)
        except TutorrlError as exc:
            report.bundle_errors.append((display_path(folder), exc.render()))
            report.fix.append(advice.remove(folder))
            continue
        orphans.setdefault(side.manifest.experiment, []).append(side)
        report.orphans.append((display_path(folder), f"experiment {side.manifest.experiment}, verl {side.manifest.verl}"))
        report.fix.append(advice.remove(folder))

    # A launch several specs hold records the sources of one of them (store._refresh_provenance):
    # each holder accepts the record of any, and the bundle is exact where one holder's is.
    read_source = bases.source_reader(specs_root)
    rerecorded: set[str] = set()
    exact = {name for _, name, bundle, _ in compiled if bundle is None}
    recorded_by: dict[str, list[dict]] = {}
    for _, name, bundle, _ in compiled:
        if bundle is not None:
            recorded_by.setdefault(name, []).append(bundle.manifest.provenance)
    for label, name, bundle, point in compiled:
        folder = bundles_root / name
        result = SpecResult(label, display_path(folder), "ok", point=point)
        if name in present:
            if bundle is not None:
                try:
                    side = tree.side(name)
                    if side.manifest.provenance != bundle.manifest.provenance and name not in exact and \
                            side.manifest.provenance not in recorded_by[name]:
                        # The launch is the same; the manifest's record of what it was compiled from is not.
                        result.state = "stale"
                        # A plain compile keeps a record it cannot prove false (its sources are not
                        # beside this spec: a spec since removed, or another folder's); no spec gives
                        # it, so one holder re-records it in place (not moving its runs/ and evidence/).
                        keeps = recorded_still_true(side.manifest, os.path.dirname(label), read=read_source,
                                                    climbs=bundle.manifest.sources)
                        result.message = _provenance_change(side.manifest, bundle.manifest, keeps)
                        if not (keeps and name in rerecorded):  # (one holder re-records it for all)
                            rerecorded.add(name)
                            report.fix.append(advice.compile_and_add(label, folder, rerecord=keeps,
                                                                     manifest=bundle.files[MANIFEST]))
                except TutorrlError as exc:
                    result.state, result.message = "invalid", exc.render()
                    if staged and _verifies(folder):
                        report.fix.append(f"git add {shlex.quote(display_path(folder))}   (the copy on disk verifies)")
                    else:
                        report.fix.append(advice.remove(folder))
                        report.fix.append(advice.compile_and_add(label, folder))
        else:
            result.state = "missing"
            before = orphans.get(bundle.manifest.experiment, [])
            if before:
                side = compiled_side(bundle, label)
                diffs = [diff_sides(o, side) for o in before]
                result.diff = min(diffs, key=_size)
                old = result.diff.old.label
                result.message = f"{old} is stale; what changed:" if staged else \
                    f"the committed {old} is stale; what changed:"
            else:
                result.message = f"no bundle of this experiment is {'staged' if staged else 'committed'}"
            report.fix.append(advice.compile_and_add(label, folder))
        report.specs.append(result)
    # A sweep's points share their spec's command.
    report.fix = list(dict.fromkeys(report.fix))
    return report


def _provenance_change(old, new, keeps: bool = False) -> str:
    if keeps:
        extra = " with --set values" if old.set else ""
        return (f"the launch is current, but its manifest records it as compiled from "
                f"{', '.join(sorted(old.sources))}{extra}, as no spec here compiles it; a plain compile keeps "
                "that record (nothing beside the spec proves it false), so compile one spec that holds it "
                "with --rerecord to record that spec's")
    changed = sorted(name for name in set(old.sources) | set(new.sources)
                     if old.sources.get(name) != new.sources.get(name))
    what = (f"{', '.join(changed)} changed where it changes nothing the launch is given" if changed
            else "its point or --set values differ")
    return f"the launch is current, but its manifest records other sources ({what}); compile again to record them"


class _Bases:
    """The specs others extend, and how a spec's chain is read in this tree."""

    def __init__(self, names: set[str], staged: dict[str, bytes] | None):
        self.names, self._staged = names, staged

    def __contains__(self, label: str) -> bool:
        return label in self.names

    def note(self, label: str, raw: bytes) -> None:
        """Add the bases spec ``label`` extends (a substring test, then its chain)."""
        from tutorrl.compiler.pipeline import bases_of, might_compose

        if might_compose(raw):
            self.names.update(os.path.normpath(b) for b in bases_of(label, raw, self.read))

    def read(self, path: str, name: str) -> bytes:
        from tutorrl.compiler.spec import read_spec_bytes

        if self._staged is not None:
            staged = self._staged.get(os.path.normpath(path))
            if staged is not None:
                return staged
        return read_spec_bytes(path, name)

    def source_reader(self, specs_root: Path):
        """How recorded_still_true reads a recorded source: from the disk (None), or in
        staged mode as git would commit it -- a file under the specs folder that is
        not staged is not there, whatever the work tree holds; one outside it is read
        from the disk, as the chain of a spec is (:meth:`read`)."""
        if self._staged is None:
            return None
        root = os.path.abspath(specs_root)

        def read(path: str) -> bytes:
            from tutorrl._read import read_file

            staged = self._staged.get(os.path.normpath(path))
            if staged is not None:
                return staged
            if os.path.commonpath([root, os.path.abspath(path)]) == root:
                raise FileNotFoundError(path)
            return read_file(path, 1 << 20, follow=True)

        return read


def _bases(tree) -> _Bases:
    """Which of the tree's specs are bases of others: each spec that may extend
    one (a substring test, then its chain) names its bases."""
    staged = {os.path.normpath(label): raw for label, raw in tree.specs()} if tree.staged else None
    found = _Bases(set(), staged)
    for label, raw in tree.specs():
        found.note(label, raw)
    return found


def _verifies(folder: Path) -> bool:
    try:
        bundle_side(folder, display_path(folder))
    except TutorrlError:
        return False
    return True


def report_json(report: CheckReport) -> str:
    """The report as JSON: what a CI step or an editor integration reads."""
    import msgspec

    doc = {
        "ok": report.exit_code == 0,
        "exit_code": report.exit_code,
        "staged": report.staged,
        "specs": [{"spec": r.spec, "point": r.point or None, "bundle": r.bundle or None,
                   "state": r.state if r.diff is None else "stale", "message": r.message or None,
                   "diff": msgspec.to_builtins(r.diff) if r.diff is not None else None}
                  for r in report.specs],
        "orphans": [{"bundle": b, "what": what} for b, what in report.orphans],
        "bundle_errors": [{"bundle": b, "message": m} for b, m in report.bundle_errors],
        "fix": list(report.fix),
    }
    return msgspec.json.format(msgspec.json.encode(doc), indent=2).decode() + "\n"


def format_report(report: CheckReport, color: bool = False) -> str:
    from tutorrl.review.render import render

    def paint(text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if color else text

    lines: list[str] = []
    for r in report.specs:
        spec = f"{r.spec} [{r.point}]" if r.point else r.spec
        if r.state == "ok":
            lines.append(f"{paint('ok', '32')}      {spec} -> {r.bundle}")
        elif r.state == "stale":
            lines.append(f"{paint('stale', '31')}   {spec} -> {r.bundle}: {r.message}")
        elif r.state == "error":
            lines.append(f"{paint('error', '31')}   {r.spec} does not compile:")
            lines += ["  " + line for line in r.message.splitlines()]
        elif r.state == "invalid":
            lines.append(f"{paint('error', '31')}   {r.spec}: its bundle {r.bundle} does not verify:")
            lines += ["  " + line for line in r.message.splitlines()]
        else:
            label = "stale  " if r.diff is not None else "missing"
            where = "is not staged" if report.staged else "is missing"
            lines.append(f"{paint(label, '31')} {spec}: compiles to {r.bundle}, which {where}; {r.message}")
            if r.diff is not None:
                lines += ["  " + line if line else "" for line in render(r.diff, "text", color).splitlines()]
    for folder, what in report.orphans:
        lines.append(f"{paint('orphan', '31')}  {folder} ({what}): no spec compiles to it")
    for folder, message in report.bundle_errors:
        lines.append(f"{paint('error', '31')}   {folder} does not verify:")
        lines += ["  " + line for line in message.splitlines()]
    n = len({r.spec for r in report.specs})
    launches = f" ({len(report.specs)} launches)" if len(report.specs) != n else ""
    if report.exit_code == 0:
        what = "staged spec" if report.staged else "spec"
        lines.append(f"{n} {what}{'s' if n != 1 else ''}{launches}: every bundle is "
                     f"{'staged and ' if report.staged else ''}up to date")
    else:
        if report.fix:
            lines.append("")
            lines.append("to fix:")
            lines += [f"  {cmd}" for cmd in report.fix]
    return "\n".join(lines) + "\n"
