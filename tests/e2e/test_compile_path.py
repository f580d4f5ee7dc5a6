"""The compile user path, end to end through the real `tutorrl` command:
write a spec, compile, verify, change a setting, recompile, review the change."""

from __future__ import annotations

import shutil

import support


def test_compile_verify_change_review(tmp_path):
    spec = tmp_path / "experiment.toml"
    shutil.copy(support.SPECS / "chess_tutor_grpo.toml", spec)

    first = support.cli("compile", spec.name, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    old = first.stdout.strip().splitlines()[-1]
    assert old.startswith("bundles/") and (tmp_path / old / "launch.sh").is_file()

    assert support.cli("verify", old, cwd=tmp_path).returncode == 0
    again = support.cli("compile", spec.name, cwd=tmp_path)
    assert again.stdout.strip().splitlines()[-1] == old and "unchanged" in again.stderr

    spec.write_text(spec.read_text().replace("save_freq = 20", "save_freq = 10"))
    second = support.cli("compile", spec.name, cwd=tmp_path)
    new = second.stdout.strip().splitlines()[-1]
    assert new != old

    review = support.cli("diff", old, new, "--format", "markdown", cwd=tmp_path)
    assert review.returncode == 1, review.stderr
    assert "trainer.save_freq" in review.stdout and "20" in review.stdout and "10" in review.stdout

    (tmp_path / new / "launch.sh").write_text("echo tampered\n")
    tampered = support.cli("verify", new, cwd=tmp_path)
    assert tampered.returncode == 2 and "launch.sh was modified" in tampered.stderr
