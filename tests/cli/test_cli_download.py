"""`sapiens2 download` (issue 33): each task's default size without `--size`, as predict uses, and an offline
failure whose advice is about downloading (not predict's `--checkpoint`).

Offline is real: huggingface_hub with HF_HUB_OFFLINE=1 and an endpoint nothing listens on.
"""

from __future__ import annotations

import pytest
from sapiens2_studio.cli.main import main
from sapiens2_studio.core.testing.synthetic import write_synthetic_checkpoint


@pytest.fixture
def offline(monkeypatch):
    pytest.importorskip("huggingface_hub")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # read at its import; the variable is for new ones


@pytest.mark.parametrize(
    ("task", "file"), [("pose", "sapiens2_0.4b_pose"), ("matting", "sapiens2_1b_matting")]
)
def test_download_without_size_takes_the_tasks_default(tmp_path, capsys, task, file) -> None:
    present = write_synthetic_checkpoint(tmp_path / task / f"{file}.safetensors", task=task)
    assert main(["download", "--task", task, "--checkpoint-dir", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == str(present)
    assert "downloading" not in captured.err  # it is there: nothing is fetched


def test_offline_download_names_the_file_and_download_advice(tmp_path, capsys, offline) -> None:
    assert main(["download", "--task", "matting", "--checkpoint-dir", str(tmp_path)]) == 4
    err = capsys.readouterr().err
    assert (
        "downloading sapiens2_1b_matting.safetensors from https://huggingface.co/facebook/sapiens2-matting-1b"
        in err
    )
    assert "could not download sapiens2_1b_matting.safetensors" in err
    assert f"save it as {tmp_path / 'matting' / 'sapiens2_1b_matting.safetensors'}" in err
    assert "run this again when the Hub is reachable" in err and "--checkpoint" not in err
    assert not (tmp_path / "matting" / "sapiens2_1b_matting.safetensors").exists()


def test_download_of_an_unknown_size_is_refused(tmp_path, capsys) -> None:
    assert main(["download", "--task", "pose", "--size", "2b", "--checkpoint-dir", str(tmp_path)]) != 0
    assert "2b" in capsys.readouterr().err
