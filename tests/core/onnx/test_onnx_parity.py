"""ONNX export parity: ONNX Runtime (CPU) against PyTorch on tiny official-layout checkpoints of every task.

Two claims, tested separately (docs/deploy.md, "Precision"):

* the graph is the model: with float32 RoPE, ORT matches PyTorch fp32 within rel-L2 1e-5 for every head;
* with the released bfloat16 RoPE (q/k rounded to bf16), last-bit differences between any two fp32 GEMMs become
  occasional bf16 steps, so PyTorch fp32 itself is ~1e-5 away from the exact (float64) model. There ORT must be as
  close to float64 as PyTorch fp32 is, and within both distances of PyTorch fp32.

Also: one file runs batch 1 and 4, fp16 files stay within the bf16 tolerance, and damaged files or files of another
task are refused before any session is built.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from sapiens2_studio.cli.main import main
from sapiens2_studio.core.checkpoints.loader import load_model
from sapiens2_studio.core.formats.bundle import CaptureFrame, read_bundle
from sapiens2_studio.core.onnx import (
    OnnxExportError,
    OnnxFileError,
    OnnxMissingError,
    OnnxModel,
    export_onnx,
    read_metadata,
)
from sapiens2_studio.core.onnx import export as export_module
from sapiens2_studio.core.pipeline.predict import predict_seg
from sapiens2_studio.core.pipeline.preprocess import normalize, preprocess_dense
from sapiens2_studio.core.studio.compute.run_tasks import TaskOptions, run_tasks
from sapiens2_studio.core.studio.errors import StudioError
from sapiens2_studio.core.studio.runtime import models
from sapiens2_studio.core.studio.runtime.host import Host
from sapiens2_studio.core.studio.sources.inputs import load_image
from sapiens2_studio.core.studio.studio import Studio
from sapiens2_studio.core.testing.synthetic import state_dict_for, tiny_config

TASKS = ("pretrain", "pose", "seg", "normal", "albedo", "pointmap", "matting")
ASSET = Path(__file__).resolve().parents[3] / "assets" / "demo" / "astronaut.jpg"


@pytest.fixture(scope="module")
def photos() -> torch.Tensor:
    """Four real network inputs (the demo photo, mirrored and shifted), normalised as the pipeline does."""
    base = np.asarray(Image.open(ASSET).convert("RGB"))
    views = [base, base[:, ::-1], np.roll(base, 80, axis=1), base[::-1]]
    pixels = [torch.from_numpy(v.copy()).permute(2, 0, 1) for v in views]
    return torch.stack([normalize(preprocess_dense(p, quantize=True)[0]) for p in pixels])


@pytest.fixture(scope="module")
def exported(tiny_checkpoints, tmp_path_factory) -> dict[str, Path]:
    """Each tiny checkpoint exported once (released settings: bf16 RoPE, fp32 weights)."""
    folder = tmp_path_factory.mktemp("onnx")
    return {t: export_onnx(tiny_checkpoints[t], folder / f"tiny_{t}.onnx", task=t).path for t in TASKS}


def _outs(value) -> list[torch.Tensor]:
    return [t.float() for t in (value if isinstance(value, tuple) else (value,))]


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


@pytest.mark.parametrize("task", TASKS)
def test_the_graph_is_the_model_within_1e_5(task, tiny_checkpoints, photos, tmp_path):
    exact = load_model(tiny_checkpoints[task], rope_dtype="fp32")
    export_onnx(exact, tmp_path / "fp32rope.onnx")
    runtime = OnnxModel(tmp_path / "fp32rope.onnx", device="cpu")
    with torch.inference_mode():
        pairs = list(zip(_outs(runtime(photos[:1])), _outs(exact(photos[:1])), strict=True))
    for got, want in pairs:
        assert got.shape == want.shape
        assert _rel(got, want) <= 1e-5


@pytest.mark.parametrize("task", TASKS)
def test_released_model_is_as_exact_as_pytorch(task, tiny_checkpoints, exported, photos):
    meta = read_metadata(exported[task], task=task)
    assert (meta.task, meta.rope_dtype, meta.weights_dtype) == (task, "bf16", "fp32")
    runtime = OnnxModel(exported[task], task=task, device="cpu")
    with torch.inference_mode():
        onnx = _outs(runtime(photos[:1]))
        torch32 = _outs(load_model(tiny_checkpoints[task])(photos[:1]))
        truth = _outs(load_model(tiny_checkpoints[task], dtype=torch.float64)(photos[:1].double()))
    for got, want, exact in zip(onnx, torch32, truth, strict=True):
        floor = _rel(want, exact)  # PyTorch fp32's own distance from the exact model (~1e-5 with bf16 RoPE)
        draws = 3.0 if got.numel() == 1 else 1.5  # the pointmap scale, one number, is one draw of the noise
        assert _rel(got, exact) <= draws * floor + 1e-6
        assert _rel(got, want) <= (draws + 1) * floor + 1e-6


@pytest.mark.parametrize("task", ("pointmap", "pose"))
def test_one_file_runs_batch_1_and_4(task, exported, photos):
    runtime = OnnxModel(exported[task], device="cpu")
    with torch.inference_mode():
        four = _outs(runtime(photos))
        for i in range(4):
            for batch, single in zip(four, _outs(runtime(photos[i : i + 1])), strict=True):
                assert batch.shape[0] == 4 and single.shape[0] == 1
                assert _rel(batch[i : i + 1], single) <= 1e-6


def test_fp16_export_from_the_cli_is_within_the_bf16_tolerance(tiny_checkpoints, photos, tmp_path, capsys):
    out = tmp_path / "half.onnx"
    argv = [
        "export",
        "onnx",
        str(out),
        "--checkpoint",
        str(tiny_checkpoints["pointmap"]),
        "--task",
        "pointmap",
    ]
    assert main([*argv, "--dtype", "fp16", "--json", "--checkpoint-dir", str(tmp_path)]) == 0
    written = json.loads(capsys.readouterr().out)
    assert (written["task"], written["dtype"], written["outputs"]) == (
        "pointmap",
        "fp16",
        ["pointmap", "scale"],
    )
    meta = read_metadata(out, task="pointmap")
    assert meta.weights_dtype == "fp16" and meta.source_checkpoint == "tiny_pointmap.safetensors"
    runtime = OnnxModel(out, device="cpu")
    with torch.inference_mode():
        pairs = zip(_outs(runtime(photos[:2])), _outs(load_model(tiny_checkpoints["pointmap"])(photos[:2])))
        for got, want in pairs:
            assert got.dtype == torch.float32
            assert _rel(got, want) <= 0.03  # docs/performance.md "bf16 tolerance"
    argv = ["export", "onnx", str(tmp_path / "seg.onnx"), "--checkpoint", str(tiny_checkpoints["pose"])]
    assert main([*argv, "--task", "seg", "--checkpoint-dir", str(tmp_path)]) != 0
    assert "pose" in capsys.readouterr().err and not (tmp_path / "seg.onnx").exists()


def test_a_file_of_another_task_is_refused(exported):
    with pytest.raises(OnnxFileError, match="exported for the pose task, but a seg model is needed"):
        OnnxModel(exported["pose"], task="seg", device="cpu")
    with pytest.raises(OnnxFileError, match="exported for the pose task"):
        models.check_checkpoint(exported["pose"], task="normal", runtime="onnxruntime")
    with pytest.raises(StudioError, match="ONNX file, which runs with ONNX Runtime"):
        models.check_checkpoint(exported["pose"], task="pose", runtime="torch")
    with pytest.raises(OnnxExportError, match="is a pose model, not seg"):
        export_onnx(load_model(state_dict_for(tiny_config("pose"))), Path("unused.onnx"), task="seg")


def test_damaged_files_are_refused_before_a_session(exported, tmp_path):
    whole = exported["seg"].read_bytes()
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(whole[: len(whole) * 2 // 3])
    with pytest.raises(OnnxFileError, match="not a complete ONNX file"):
        read_metadata(truncated)
    flipped = tmp_path / "flipped.onnx"
    data = bytearray(whole)
    data[len(data) // 2] ^= 0x01  # one bit of one weight
    flipped.write_bytes(bytes(data))
    with pytest.raises(OnnxFileError, match="damaged"):
        OnnxModel(flipped, device="cpu")
    other = tmp_path / "other.onnx"
    other.write_bytes(b"not an onnx file at all")
    with pytest.raises(OnnxFileError):
        models.check_checkpoint(other, task="seg", runtime="onnxruntime")
    intact = tmp_path / "intact.onnx"
    shutil.copyfile(exported["seg"], intact)
    assert read_metadata(intact, task="seg").class_names[:1] == ("Background",)


def test_weights_beside_the_file_are_sealed_too(tiny_checkpoints, photos, tmp_path, monkeypatch):
    """The 1B and 5B fp32 files are over ONNX's 2 GB protobuf limit: their weights go to OUT.onnx.data."""
    monkeypatch.setattr(export_module, "EXTERNAL_DATA_BYTES", 0)
    report = export_onnx(tiny_checkpoints["pretrain"], tmp_path / "big.onnx")
    data = tmp_path / "big.onnx.data"
    assert data.is_file() and data.stat().st_size > report.path.stat().st_size
    with torch.inference_mode():
        got = OnnxModel(report.path, device="cpu")(photos[:1])
        assert _rel(got, load_model(tiny_checkpoints["pretrain"])(photos[:1])) <= 2e-5
    damaged = bytearray(data.read_bytes())
    damaged[len(damaged) // 2] ^= 0x01
    data.write_bytes(bytes(damaged))
    with pytest.raises(OnnxFileError, match=r"big\.onnx\.data \(the weights of big\.onnx\) is damaged"):
        read_metadata(report.path)


def test_predict_refuses_a_wrong_or_damaged_file_before_reading_any_image(exported, tmp_path, capsys):
    photo = tmp_path / "unreadable.png"
    photo.write_bytes(b"not an image: reading it would fail with another message")
    truncated = tmp_path / "seg.onnx"
    truncated.write_bytes(exported["seg"].read_bytes()[:5000])
    cases = ((exported["pose"], "was exported for the pose task, but a seg model is needed"),)
    cases += ((truncated, "seg.onnx is not a complete ONNX file"),)
    for checkpoint, message in cases:
        argv = ["predict", str(photo), "--tasks", "seg", "--out", str(tmp_path / "out"), "--device", "cpu"]
        assert main([*argv, "--runtime", "onnxruntime", f"--checkpoint=seg={checkpoint}"]) == 1
        err = capsys.readouterr().err
        assert message in err and "unreadable.png" not in err, err
        assert not (tmp_path / "out").exists()


def test_the_4k_window_tokenizer_is_refused_with_its_reason(tmp_path, capsys):
    model = load_model(state_dict_for(tiny_config("pretrain", tokenizer_layers=1)))
    with pytest.raises(OnnxExportError, match="4K window tokenizer cannot be exported") as info:
        export_onnx(model, tmp_path / "4k.onnx")
    assert "run it in PyTorch" in str(info.value)
    assert not (tmp_path / "4k.onnx").exists()
    argv = ["export", "onnx", str(tmp_path / "4k.onnx"), "--task", "pretrain", "--size", "1b-4k"]
    assert main([*argv, "--no-download", "--checkpoint-dir", str(tmp_path)]) == 1  # refused before any lookup
    err = capsys.readouterr().err
    assert "1b-4k model's 4K window tokenizer cannot be exported" in err and "not found" not in err


# --- the whole pipeline: `sapiens2 predict --runtime onnxruntime` against PyTorch, bundle against bundle ----------

PREDICT_TASKS = ("pose", "seg", "normal", "albedo", "pointmap", "matting")


def _predict(capsys, photo: Path, out: Path, checkpoints: dict[str, Path], *extra: str) -> CaptureFrame:
    argv = ["predict", str(photo), "--tasks", ",".join(PREDICT_TASKS), "--out", str(out), "--device", "cpu"]
    argv += ["--no-download", "--no-previews", *(f"--checkpoint={t}={checkpoints[t]}" for t in PREDICT_TASKS)]
    rc = main([*argv, *extra])
    assert rc == 0, capsys.readouterr().err
    return read_bundle(out / f"{photo.stem}.json")


def _assert_close(got: np.ndarray, want: np.ndarray, name: str) -> None:
    """A float channel of two bundles whose networks agree to ~1e-5: the bundle stores normals, albedo and matte
    as float16 (one step is 2^-11 of the value, so ~2 % of values land on the neighbouring step and the rel-L2
    floor is ~1e-4), and a few pixels are ill-conditioned (a short raw normal made unit, a point near Z = 0)."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    assert g.shape == w.shape, name
    assert float(np.linalg.norm(g - w) / np.linalg.norm(w)) <= 3e-4, name
    assert float(np.abs(g - w).max()) <= 0.05 * float(np.sqrt(np.mean(w * w))), name


def test_predict_with_onnxruntime_writes_the_same_bundle(exported, tiny_checkpoints, tmp_path, capsys):
    photo = tmp_path / "person.jpg"
    shutil.copyfile(ASSET, photo)
    torch_frame = _predict(capsys, photo, tmp_path / "torch", tiny_checkpoints)
    onnx_frame = _predict(
        capsys, photo, tmp_path / "onnx", exported, "--runtime", "onnxruntime", "--progress", "json"
    )
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    loaded = [(e["task"], e["runtime"], e["provider"]) for e in events if e["event"] == "model_loaded"]
    assert sorted(loaded) == sorted((t, "onnxruntime", "CPUExecutionProvider") for t in PREDICT_TASKS)

    # who ran each model is recorded; everything else about the run is the same
    for entry in onnx_frame.models:
        assert (entry["runtime"], entry["provider"]) == ("onnxruntime", "CPUExecutionProvider"), entry
    assert all("runtime" not in entry for entry in torch_frame.models)
    assert [m["task"] for m in onnx_frame.models] == [m["task"] for m in torch_frame.models]
    assert np.array_equal(onnx_frame.image, torch_frame.image)

    # seg: a label may differ only where PyTorch's two best logits are closer than the runtimes' difference
    logits = predict_seg(load_model(tiny_checkpoints["seg"]), [load_image(photo)], keep_logits=True)[0].logits
    assert np.array_equal(logits.argmax(0).numpy(), torch_frame.seg)
    best = logits.topk(2, dim=0).values.numpy()
    flipped = onnx_frame.seg != torch_frame.seg
    assert flipped.mean() <= 1e-4
    assert (best[0][flipped] - best[1][flipped] <= 1e-4 * float(logits.abs().max())).all()
    foreground = torch_frame.seg > 0
    assert np.array_equal(
        (onnx_frame.mask > 0.5) != (torch_frame.mask > 0.5), flipped & (foreground != (onnx_frame.seg > 0))
    )

    for name in ("normals", "albedo", "alpha", "foreground"):
        _assert_close(getattr(onnx_frame, name), getattr(torch_frame, name), name)
    # points: stored where Z > 0 on the person; validity may flip only for points at Z ~ 0
    valid_got, valid_want = (onnx_frame.points != 0).any(-1), (torch_frame.points != 0).any(-1)
    depth = np.sqrt(np.mean(torch_frame.points[valid_want][:, 2].astype(np.float64) ** 2))
    flips = valid_got != valid_want
    assert flips.mean() <= 1e-4
    assert (np.maximum(onnx_frame.points[..., 2], torch_frame.points[..., 2])[flips] <= 1e-3 * depth).all()
    both = valid_got & valid_want
    _assert_close(onnx_frame.points[both], torch_frame.points[both], "points")
    assert onnx_frame.pointmap_scale == pytest.approx(torch_frame.pointmap_scale, rel=1e-4)
    for key, value in torch_frame.camera.items():
        assert onnx_frame.camera[key] == (
            pytest.approx(value, rel=1e-4) if isinstance(value, float) else value
        )

    # keypoints: the same boxes and scores (a score is its heatmap's maximum); a location may move only where the
    # heatmap has two maxima as close as the runtimes' difference (random tiny weights make such near-ties): the
    # score, the maximum's value, is then the same in both runs while its place is not
    assert len(onnx_frame.people) == len(torch_frame.people) > 0
    for got, want in zip(onnx_frame.people, torch_frame.people, strict=True):
        assert got.bbox == pytest.approx(want.bbox, abs=1e-3)
        np.testing.assert_allclose(got.keypoints[:, 2], want.keypoints[:, 2], rtol=1e-4, atol=1e-6)
        moved = np.linalg.norm(got.keypoints[:, :2] - want.keypoints[:, :2], axis=1) > 0.05
        assert moved.mean() <= 0.05, np.flatnonzero(moved)


def test_python_api_exports_a_checkpoint_once_and_records_the_runtime(tiny_checkpoints, tmp_path):
    image = [np.asarray(Image.open(ASSET).convert("RGB"))]
    checkpoints = {"normal": tiny_checkpoints["normal"]}
    onnx = Studio(device="cpu", runtime="onnxruntime", checkpoint_dir=tmp_path, allow_download=False)
    got = onnx.predict(image, ("normal",), checkpoints=checkpoints)["normal"]
    (cached,) = (tmp_path / "onnx").glob("tiny_normal.fp32.*.onnx")
    made = cached.stat().st_mtime_ns
    assert (got.model["runtime"], got.model["provider"]) == ("onnxruntime", "CPUExecutionProvider")
    want = Studio(device="cpu").predict(image, ("normal",), checkpoints=checkpoints)["normal"]
    assert "runtime" not in want.model
    assert (
        _rel(got.results[0].normals, want.results[0].normals) <= 1e-4
    )  # unit vectors: one shared renormalise
    again = Studio(device="cpu", runtime="onnxruntime", checkpoint_dir=tmp_path, allow_download=False)
    again.predict(image, ("normal",), checkpoints=checkpoints)
    assert cached.stat().st_mtime_ns == made and len(list((tmp_path / "onnx").glob("*.onnx"))) == 1


def test_without_the_extra_each_front_end_says_how_to_install(
    tiny_checkpoints, tmp_path, capsys, monkeypatch
):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a)
    )
    with pytest.raises(OnnxMissingError) as info:
        models.check_checkpoint(tiny_checkpoints["seg"], task="seg", runtime="onnxruntime")
    assert "pip install 'sapiens2-studio[onnx]'" in info.value.hints["cli"]
    assert "ComfyUI's Python" in info.value.hints["comfyui"]
    photo = tmp_path / "person.jpg"
    shutil.copyfile(ASSET, photo)
    argv = ["predict", str(photo), "--tasks", "seg", "--out", str(tmp_path / "out"), "--device", "cpu"]
    argv += ["--runtime", "onnxruntime", f"--checkpoint=seg={tiny_checkpoints['seg']}", "--no-download"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "needs onnxruntime, which is not installed" in err and "sapiens2-studio[onnx]" in err
    assert not (tmp_path / "out").exists()  # refused before any image is read or folder made


def test_comfyui_loader_path_runs_an_onnx_file_in_chunks(exported, tiny_checkpoints):
    """What Load Sapiens2 Model does with an .onnx file (runtime from the file, provider 'auto'), then a task node's
    engine call on a ComfyUI IMAGE batch in chunks of 2 (batch 2 through the one file), without ComfyUI."""
    photo = torch.from_numpy(np.array(Image.open(ASSET).convert("RGB").resize((192, 256)))).float() / 255
    images = torch.stack([photo, photo.flip(1), photo.roll(40, 1)])
    options = TaskOptions(chunk_size=2, flip_test=False)  # (flip tested in the bundle compare)
    for task in ("normal", "pose"):
        path = exported[task]
        loaded = models.load(path, device="auto", runtime=models.runtime_for(path))
        assert models.runtime_for(path) == "onnxruntime" and loaded.runtime == "onnxruntime"
        got = run_tasks({task: loaded}, images, Host(on_note=None), options)[task]
        want = run_tasks({task: models.load(tiny_checkpoints[task], device="cpu")}, images, None, options)[
            task
        ]
        assert got.model["provider"] == "CPUExecutionProvider" and len(got) == 3
        for a, b in zip(got.results, want.results, strict=True):
            if task == "normal":
                assert _rel(a.normals, b.normals) <= 3e-4
            else:
                scores = [torch.as_tensor(p.keypoints[:, 2]) for p in (a.people[0], b.people[0])]
                assert _rel(scores[0], scores[1]) <= 1e-4
