"""Spec file -> :class:`CompiledBundle`: the whole compiler as one pure function."""

from __future__ import annotations

from pathlib import Path

from tutorrl.compiler.bundle import CompiledBundle, assemble
from tutorrl.compiler.keymap import load_keymap, release_map
from tutorrl.compiler.load import parse_spec, read_spec_bytes
from tutorrl.compiler.normalize import normalize
from tutorrl.compiler.resolve import resolve, variant_of
from tutorrl.errors import SpecError


def compile_spec(path: str | Path, *, display_name: str | None = None) -> CompiledBundle:
    name = display_name or str(path)
    return compile_bytes(read_spec_bytes(path, name), name)


def compile_bytes(raw: bytes, name: str) -> CompiledBundle:
    """Compile spec bytes; ``name`` only labels error messages (never hashed)."""
    spec, locate = parse_spec(raw, name)
    spec = normalize(spec)
    release = spec.experiment.verl
    supported = load_keymap().releases
    if release not in supported:
        raise SpecError([locate(("experiment", "verl"),
                                f"verl {release} is not supported",
                                f"supported releases: {', '.join(supported)}")])
    rmap = release_map(release, variant_of(spec))
    keyset = None
    if spec.verl.extra_overrides:
        from tutorrl.compiler.keysets import load_keyset

        keyset = load_keyset(release, rmap.variant)
    resolved, findings = resolve(spec, rmap, keyset)
    if findings:
        raise SpecError([locate(key.split("."), message, hint) for key, message, hint in findings])
    return assemble(spec, resolved, rmap)
