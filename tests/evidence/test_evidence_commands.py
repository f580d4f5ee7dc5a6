import json

import pytest

from evidence_helpers import make_bundle, make_fsdp_step
from tutorrl.cli import main


def test_add_list_and_json(tmp_path, capsys):
    bundle = make_bundle(tmp_path / "bundles")
    make_fsdp_step(tmp_path / "ckpts", 1)
    make_fsdp_step(tmp_path / "ckpts", 2)
    assert main(["evidence", str(bundle), "--add", str(tmp_path / "ckpts")]) == 0
    assert main(["evidence", str(bundle), "--add", str(tmp_path / "ckpts" / "global_step_1"), "--run-id", "x"]) == 0
    capsys.readouterr()
    assert main(["evidence", str(bundle)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("    skipped ")]
    assert len(lines) == 2 and "step 2" in lines[0] and "step 1" in lines[1] and "PARTIAL" in lines[0]
    assert main(["evidence", str(bundle), "--json"]) == 0
    docs = json.loads(capsys.readouterr().out)
    assert [d["predicate"]["checkpoint"]["step"] for d in docs] == [2, 1]


def test_failing_checkpoint_exits_1(tmp_path):
    bundle = make_bundle(tmp_path / "bundles")
    make_fsdp_step(tmp_path / "ckpts", 1, data_pt=False)
    assert main(["evidence", str(bundle), "--add", str(tmp_path / "ckpts" / "global_step_1")]) == 1


def test_text_output_says_why_each_failed_check_failed(tmp_path, capsys):
    bundle = make_bundle(tmp_path / "bundles")
    make_fsdp_step(tmp_path / "ckpts", 1, data_pt=False)
    assert main(["evidence", str(bundle), "--add", str(tmp_path / "ckpts" / "global_step_1")]) == 1
    added = capsys.readouterr().out.splitlines()
    assert main(["evidence", str(bundle), "--format", "json"]) == 0
    checks = json.loads(capsys.readouterr().out)[0]["predicate"]["verdict"]["checks"]
    failed = [c for c in checks if c["status"] == "fail"]
    skipped = [c for c in checks if c["status"] == "skipped"]
    assert failed and skipped
    assert main(["evidence", str(bundle)]) == 0
    listed = capsys.readouterr().out.splitlines()
    for lines in (added, listed):
        assert "failed: " in lines[0]
        # Each check short of a pass, with its reason: the failed, then the skipped.
        assert lines[1:] == ([f"    {c['id']}: {c['detail']}" for c in failed]
                             + [f"    skipped {c['id']}: {c['detail']}" for c in skipped])


@pytest.mark.parametrize("argv,msg", [
    (["--add", "{t}/missing"], "not a directory"),
    (["--add", "{t}"], "neither a global_step_N"),
    (["--engine", "http://x"], "only apply with --add"),
    (["--add", "{t}/ckpts", "--engine", "localhost:1"], "http:// or https://"),
])
def test_user_errors_exit_2_without_traceback(tmp_path, capsys, argv, msg):
    bundle = make_bundle(tmp_path / "bundles")
    make_fsdp_step(tmp_path / "ckpts", 1)
    assert main(["evidence", str(bundle), *[a.format(t=tmp_path) for a in argv]]) == 2
    err = capsys.readouterr().err
    assert msg in err and "Traceback" not in err


def test_missing_bundle(tmp_path, capsys):
    assert main(["evidence", str(tmp_path / "none")]) == 2
    assert main(["evidence", str(tmp_path), "--add", str(tmp_path)]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_format_json_lists_and_adds(tmp_path, capsys):
    bundle = make_bundle(tmp_path / "bundles")
    make_fsdp_step(tmp_path / "ckpts", 3)
    assert main(["evidence", str(bundle), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["evidence", str(bundle), "--add", str(tmp_path / "ckpts"), "--format", "json"]) == 0
    added = json.loads(capsys.readouterr().out)
    assert added["predicate"]["checkpoint"]["step"] == 3 and added["_type"] == "https://in-toto.io/Statement/v1"
    assert main(["evidence", str(bundle), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [added]


def test_a_checkpoint_holding_a_name_that_is_not_utf8_is_recorded_as_failing(tmp_path, capsys):
    import os

    bundle = make_bundle(tmp_path / "bundles")
    step = make_fsdp_step(tmp_path / "ckpts", 1)
    with open(os.path.join(os.fsencode(step / "actor" / "huggingface"), b"x\xff.json"), "wb") as fh:
        fh.write(b"{}")
    assert main(["evidence", str(bundle), "--add", str(step)]) == 1
    out = capsys.readouterr().out
    assert "files.no_symlinks" in out
    assert main(["verify", str(bundle)]) == 0


def test_a_checkpoint_path_that_is_not_utf8_is_refused_naming_it(tmp_path, capsys):
    import os

    bundle = make_bundle(tmp_path / "bundles")
    root = os.fsdecode(os.fsencode(tmp_path) + b"/ck\xff")
    from pathlib import Path

    step = make_fsdp_step(Path(root), 1)
    assert main(["evidence", str(bundle), "--add", str(step)]) == 2
    err = capsys.readouterr().err
    assert "ck\\xff" in err and "not UTF-8" in err and "Traceback" not in err
    assert not (bundle / "evidence").exists() or not any((bundle / "evidence").glob("0*.json"))
