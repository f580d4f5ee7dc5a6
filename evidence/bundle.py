"""What evidence needs from a bundle: its digest, verl release and output dir.

Goes through `tutorrl.compiler.verify_bundle` when the compiler provides it (a
tampered bundle is then refused before anything is recorded against it); until
then reads `manifest.json` and `spec.toml` directly.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

from tutorrl.errors import BundleError


@dataclass(frozen=True, slots=True)
class BundleInfo:
    path: Path
    digest: str
    verl: str
    output_dir: str | None  # as written in the spec: may be relative to the run's cwd
    model_path: str | None


def _compiler_verify():
    try:
        from tutorrl.compiler import verify_bundle  # type: ignore[attr-defined]
    except ImportError:
        return None
    return verify_bundle


def load_bundle(path: Path) -> BundleInfo:
    verify_bundle = _compiler_verify()
    if verify_bundle is not None:
        loaded = verify_bundle(path)
        trainer = getattr(loaded.spec, "trainer", None)
        model = getattr(loaded.spec, "model", None)
        return BundleInfo(
            path=Path(loaded.path), digest=loaded.manifest.digest, verl=loaded.manifest.verl,
            output_dir=getattr(trainer, "output_dir", None), model_path=getattr(model, "path", None),
        )
    return _read_directly(path)


def _read_directly(path: Path) -> BundleInfo:
    manifest = path / "manifest.json"
    try:
        doc = json.loads(manifest.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BundleError(f"{path}: not a bundle (no manifest.json)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BundleError(f"{manifest}: unreadable: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("digest"), str) or not isinstance(doc.get("verl"), str):
        raise BundleError(f"{manifest}: no string 'digest' and 'verl' fields")
    spec: dict = {}
    try:
        spec = tomllib.loads((path / "spec.toml").read_text(encoding="utf-8"))
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise BundleError(f"{path / 'spec.toml'}: unreadable: {exc}") from None
    trainer = spec.get("trainer") if isinstance(spec.get("trainer"), dict) else {}
    model = spec.get("model") if isinstance(spec.get("model"), dict) else {}
    out = trainer.get("output_dir")
    mp = model.get("path")
    return BundleInfo(path=path, digest=doc["digest"], verl=doc["verl"],
                      output_dir=out if isinstance(out, str) else None, model_path=mp if isinstance(mp, str) else None)
