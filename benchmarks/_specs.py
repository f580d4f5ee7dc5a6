"""N distinct specs for the many-spec benchmarks: the chess tutor spec, each with its own experiment name."""

from __future__ import annotations

from pathlib import Path

SPEC = Path(__file__).resolve().parent.parent / "specs" / "chess_tutor_grpo.toml"
_NAME = 'name = "chess-tutor-grpo"'


def write_specs(folder: Path, n: int) -> list[Path]:
    """``folder/s00000.toml`` ... : ``n`` specs that compile to ``n`` different bundles."""
    text = SPEC.read_text()
    assert _NAME in text, f"{SPEC} no longer names its experiment {_NAME!r}"
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        path = folder / f"s{i:05d}.toml"
        path.write_text(text.replace(_NAME, f'name = "bench-{i:05d}"'))
        paths.append(path)
    return paths
