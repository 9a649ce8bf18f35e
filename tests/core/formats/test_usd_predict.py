"""`sapiens2 predict --usd`: each input's stage is written beside its bundle at the end of the run, by the same
`core.formats.usd.export_usd` as `sapiens2 export usd` (one engine), on tiny official-layout checkpoints; the stage's
values are checked against the bundle that run wrote, read back with the project's reader."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("OpenEXR")
pytest.importorskip("pxr", reason="usd-core is in the test extra: pip install -e '.[test]'")

from pxr import Usd, UsdGeom, UsdSkel
from sapiens2_studio.cli.main import main
from sapiens2_studio.core.formats.bundle import read_bundle
from sapiens2_studio.core.formats.mesh import pointmap_to_mesh
from sapiens2_studio.core.formats.sequence import read_sequence
from sapiens2_studio.core.formats.usd import OPENCV_TO_USD


def _image(path: Path, width: int, height: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)).save(path)


def _predict(capsys, inputs: list[Path], out: Path, ckpt: dict[str, Path], *extra: str) -> tuple[int, str]:
    argv = ["predict", *map(str, inputs), "--tasks", "pose,pointmap", "--out", str(out), "--no-download"]
    argv += ["--device", "cpu", "--no-previews"]
    argv += ["--checkpoint", f"pose={ckpt['pose']}", "--checkpoint", f"pointmap={ckpt['pointmap']}"]
    rc = main([*argv, *extra])
    return rc, capsys.readouterr().err


def test_predict_usd_writes_a_stage_beside_each_bundle(tmp_path: Path, capsys, tiny_checkpoints) -> None:
    still = tmp_path / "still.png"
    _image(still, 64, 48, seed=1)
    frames = tmp_path / "walk"
    frames.mkdir()
    for n in (1, 2, 3):
        _image(frames / f"walk_{n:04d}.png", 48, 64, seed=10 + n)
    out = tmp_path / "out"
    rc, err = _predict(capsys, [still, frames], out, tiny_checkpoints, "--usd", "usdc", "--fps", "12")
    assert rc == 0, err

    # The still: one frame, its mesh the GLB/PLY triangulation of the bundle's pointmap, in USD's frame.
    stage_path = out / "still.usdc"
    assert f"USD stage {stage_path}" in err
    frame = read_bundle(out / "still.json")
    stage = Usd.Stage.Open(str(stage_path))
    mesh = UsdGeom.Mesh(stage.GetPrimAtPath("/Capture/Pointmap/Mesh"))
    points = np.asarray(mesh.GetPointsAttr().Get(), dtype=np.float64)
    expected = pointmap_to_mesh(frame.points, mask=frame.mask)
    assert len(expected.vertices) > 100  # (a tiny random model: its noisy depth keeps few triangles)
    np.testing.assert_array_equal(points, expected.vertices * OPENCV_TO_USD)  # bit-exact
    assert len(mesh.GetFaceVertexIndicesAttr().Get()) == expected.faces.size
    assert UsdGeom.GetStageUpAxis(stage) == UsdGeom.Tokens.y

    # The sequence: one stage beside its index, at the rate the run recorded, over its frame numbers.
    seq = read_sequence(out / "walk" / "walk.sequence.json")
    stage = Usd.Stage.Open(str(out / "walk" / "walk.usdc"))
    assert stage.GetTimeCodesPerSecond() == seq.fps == 12.0
    assert (stage.GetStartTimeCode(), stage.GetEndTimeCode()) == (1.0, 3.0)
    assert sorted(p.name for p in (out / "walk" / "walk_frames").iterdir()) == [
        "manifest.usda",
        "mesh_0001.usdc",
        "mesh_0002.usdc",
        "mesh_0003.usdc",
    ]
    people = [p for p in stage.Traverse() if p.IsA(UsdSkel.Skeleton)]
    assert people, "the tiny pose model finds a person in every frame"
    skeleton = UsdSkel.Skeleton(people[0])
    order = np.asarray(skeleton.GetPrim().GetAttribute("sapiens2:keypointIndex").Get())
    cache = UsdSkel.Cache()
    root = UsdSkel.Root(people[0].GetParent())
    cache.Populate(root, Usd.TraverseInstanceProxies())
    query = cache.GetSkelQuery(skeleton)
    for loaded in seq:
        person = loaded.people[0]
        xforms = query.ComputeJointSkelTransforms(Usd.TimeCode(loaded.frame))
        joints = np.array([[m[3][0], m[3][1], m[3][2]] for m in xforms])
        truth = person.keypoints_3d[order].astype(np.float64) * OPENCV_TO_USD
        known = np.isfinite(truth).all(axis=1)
        assert known.sum() >= 20  # keypoints on the random depth that have a 3D point
        # The tiny random model puts points up to ~25 m away, where float32 steps are 2e-6 m: a relative bound
        # here (the 1e-6 m bound on capture-scale data is test_usd_export's).
        np.testing.assert_allclose(joints[known], truth[known], rtol=1e-6, atol=1e-6)


def test_predict_usd_refuses_before_any_model_loads(
    tmp_path: Path, capsys, tiny_checkpoints, monkeypatch
) -> None:
    still = tmp_path / "still.png"
    _image(still, 32, 32, seed=2)
    with pytest.raises(SystemExit) as exc:
        _predict(capsys, [still], tmp_path / "out", tiny_checkpoints, "--usd", "usdq")
    assert exc.value.code == 2 and "invalid choice: 'usdq'" in capsys.readouterr().err

    # usd-core missing: a usage error naming the extra, and nothing written.
    import builtins

    real_import = builtins.__import__

    def no_pxr(name, *args, **kwargs):
        if name == "pxr" or name.startswith("pxr."):
            raise ImportError("No module named 'pxr'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pxr)
    rc, err = _predict(capsys, [still], tmp_path / "out2", tiny_checkpoints, "--usd", "usda")
    assert rc == 2, err
    assert "--usd: USD export needs Pixar's 'usd-core' package" in err and "sapiens2-studio[usd]" in err
    assert not (tmp_path / "out2" / "still.json").exists()
