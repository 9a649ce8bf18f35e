"""USD export (core/formats/usd.py, `sapiens2 export usd`): the stage opens in usd-core, passes its validators, and
every value round-trips against the bundle it came from (read back with the project's reader, never hard-coded).

The moving capture below is made to be awkward: a body that sways at 3 Hz and bobs at 2 Hz in depth, wrists that
swing at 2.5 Hz in opposite phase and cross, a second person who enters at frame 5 and leaves after frame 11,
keypoints off the body (no 3D there), a patch without normals, an off-centre principal point with fx != fy.
`write_moving_sequence` is also used by the Blender check (tests/blender/test_blender_addon.py loads it by path).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pxr = pytest.importorskip("pxr", reason="usd-core is in the test extra: pip install -e '.[test]'")

from pxr import Gf, Sdf, Usd, UsdGeom, UsdSkel, UsdValidation  # noqa: E402
from sapiens2_studio.core.formats.bundle import (  # noqa: E402
    CaptureFrame,
    CapturePerson,
    read_bundle,
    write_bundle,
)
from sapiens2_studio.core.formats.exr import srgb_to_linear  # noqa: E402
from sapiens2_studio.core.formats.mesh import pointmap_to_mesh, vertex_pixels  # noqa: E402
from sapiens2_studio.core.formats.sequence import read_sequence, write_sequence  # noqa: E402
from sapiens2_studio.core.formats.usd import (  # noqa: E402
    FPS_ATTRIBUTE,
    OPENCV_TO_USD,
    UsdExportError,
    export_usd,
    joint_tree,
)

REPO = Path(__file__).resolve().parents[3]
W, H = 64, 48
CAMERA = {"fx": 72.0, "fy": 70.0, "cx": 30.5, "cy": 25.25, "source": "pointmap"}
FPS = 30.0
FRAMES = 15


# ------------------------------------------------------------------------------------------------ test data


def _sphere(center: np.ndarray, radius: float, camera: dict, width: int, height: int):
    """Points and outward normals of a sphere seen by the pinhole `camera` (OpenCV frame), and its mask."""
    uu, vv = np.meshgrid(np.arange(width) + 0.5, np.arange(height) + 0.5)
    rays = np.stack(
        [(uu - camera["cx"]) / camera["fx"], (vv - camera["cy"]) / camera["fy"], np.ones_like(uu)], -1
    )
    a = (rays * rays).sum(-1)
    b = (rays * center).sum(-1)
    disc = b * b - a * (center @ center - radius * radius)
    mask = disc > 0
    t = np.where(mask, (b - np.sqrt(np.where(mask, disc, 0.0))) / a, 0.0)
    points = rays * t[..., None]
    normals = (points - center) / radius
    points[~mask] = 0.0
    normals[~mask] = 0.0
    return points.astype(np.float32), normals.astype(np.float32), mask


def _project(points: np.ndarray, camera: dict) -> np.ndarray:
    return np.stack(
        [
            camera["fx"] * points[:, 0] / points[:, 2] + camera["cx"],
            camera["fy"] * points[:, 1] / points[:, 2] + camera["cy"],
        ],
        axis=1,
    )


def moving_frames(
    frames: int = FRAMES, fps: float = FPS, width: int = W, height: int = H, camera: dict = CAMERA
):
    """CaptureFrames of the moving capture (see the module docstring)."""
    rng = np.random.default_rng(31)
    offsets = rng.normal(0.0, 0.12, size=(308, 3)) * np.array([1.0, 1.6, 0.3])
    phases = rng.uniform(0, 2 * np.pi, size=308)
    out = []
    for i in range(frames):
        t = i / fps
        center = np.array(
            [0.12 * np.sin(2 * np.pi * 3.0 * t), 0.02, 3.0 + 0.25 * np.sin(2 * np.pi * 2.0 * t)]
        )
        points, normals, mask = _sphere(center, 0.9, camera, width, height)
        normals[10:13, 20:24] = np.nan  # no normal here: the writer stores 0, the USD export fills from faces
        seg = np.where(mask, (np.arange(width)[None] // 6 + np.arange(height)[:, None] // 6) % 28 + 1, 0)
        image = rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)
        albedo = rng.uniform(0, 1, size=(height, width, 3)).astype(np.float32)
        alpha = np.clip(mask * 0.95 + rng.uniform(0, 0.05, size=mask.shape), 0, 1).astype(np.float32)
        people = []
        for track, shift, present in ((2, 0.0, True), (5, 0.35, 4 <= i <= 10)):
            if not present:
                continue
            joints = center + offsets * 0.8 + np.array([shift, 0.0, 0.0])
            joints = joints + 0.02 * np.sin(2 * np.pi * 4.0 * t + phases)[:, None]  # 4 Hz tremor per joint
            swing = 0.3 * np.sin(2 * np.pi * 2.5 * t)  # wrists 41 (right) and 62 (left) cross each other
            joints[41] = center + np.array([swing + shift, 0.1, -0.5])
            joints[62] = center + np.array([-swing + shift, 0.1, -0.5])
            xy = _project(joints, camera)
            xy[7] = (-4.0, 10.0)  # outside the image: no 3D
            xy[8] = (1.0, 1.0)  # a corner pixel off the sphere: no 3D
            scores = rng.uniform(0.4, 0.99, size=(308, 1))
            people.append(
                CapturePerson(
                    bbox=(0.0, 0.0, width, height), keypoints=np.hstack([xy, scores]), track_id=track
                )
            )
        out.append(
            CaptureFrame(
                width=width, height=height, image=image, points=points, normals=normals, albedo=albedo,
                seg=seg.astype(np.int32), mask=mask.astype(np.float32), alpha=alpha, foreground=None,
                camera=dict(camera), people=people, pointmap_scale=1.0,
            )
        )  # fmt: skip
    return out


def write_moving_sequence(folder: Path, name: str = "moving", frames: int = FRAMES, fps: float = FPS) -> Path:
    """The moving capture as a bundle sequence; returns its index."""
    return write_sequence(folder, name, moving_frames(frames, fps), fps=fps)


@pytest.fixture(scope="module")
def moving(tmp_path_factory) -> Path:
    return write_moving_sequence(tmp_path_factory.mktemp("moving"))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """The 8x6 exact bundle of the Blender tests (its writer, loaded by path)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "usd_sc", REPO / "tests" / "blender" / "synthetic_capture.py"
    )
    sc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sc)
    return sc.write_tiny(tmp_path_factory.mktemp("tiny"))


def validate(path: Path) -> list[str]:
    """Every validator usd-core registers (the framework `usdchecker` runs), on the stage at `path`."""
    validators = UsdValidation.ValidationRegistry().GetOrLoadAllValidators()
    errors = UsdValidation.ValidationContext(validators).Validate(Usd.Stage.Open(str(path)))
    return [f"{e.GetName()}: {e.GetMessage()}" for e in errors]


def mesh_expectation(frame: CaptureFrame):
    """(points, faces, vertex pixels) the stage must hold for a frame, from the GLB/PLY rule."""
    mesh = pointmap_to_mesh(frame.points, mask=frame.mask)
    return mesh.vertices * OPENCV_TO_USD, mesh.faces, vertex_pixels(frame.points, frame.mask)


# ------------------------------------------------------------------------------------------------ tests


@pytest.mark.parametrize("suffix", [".usda", ".usdc", ".usdz"])
def test_validators_pass_on_sequence_and_frame(moving, tiny, tmp_path, suffix):
    seq = export_usd(moving, tmp_path / f"moving{suffix}")
    one = export_usd(tiny, tmp_path / f"tiny{suffix}")
    assert validate(seq.path) == [] and validate(one.path) == []
    assert seq.frames == FRAMES and one.frames == 1


def test_validators_are_not_vacuous(tiny, tmp_path):
    """The same validators do reject a stage without metersPerUnit: passing means something."""
    path = export_usd(tiny, tmp_path / "tiny.usda").path
    layer = Sdf.Layer.FindOrOpen(str(path))
    layer.ClearMetersPerUnit() if hasattr(layer, "ClearMetersPerUnit") else layer.pseudoRoot.ClearInfo(
        "metersPerUnit"
    )
    layer.Save()
    assert any("metersPerUnit" in e for e in validate(path))


def test_stage_metadata_and_model_hierarchy(moving, tmp_path):
    stage = Usd.Stage.Open(str(export_usd(moving, tmp_path / "m.usdc").path))
    seq = read_sequence(moving)
    assert UsdGeom.GetStageUpAxis(stage) == UsdGeom.Tokens.y
    assert UsdGeom.GetStageMetersPerUnit(stage) == 1.0
    assert stage.GetTimeCodesPerSecond() == seq.fps == stage.GetFramesPerSecond()
    assert (stage.GetStartTimeCode(), stage.GetEndTimeCode()) == (seq.frame_numbers[0], seq.frame_numbers[-1])
    assert stage.GetDefaultPrim().GetPath() == Sdf.Path("/Capture")
    # the rate again as a custom attribute, which Blender's importer (unlike the metadata) reads: see check_usd.py
    assert stage.GetDefaultPrim().GetAttribute(FPS_ATTRIBUTE).Get() == seq.fps
    kinds = {
        str(p.GetPath()): Usd.ModelAPI(p).GetKind() for p in stage.Traverse() if Usd.ModelAPI(p).GetKind()
    }
    assert kinds["/Capture"] == "assembly" and kinds["/Capture/Pointmap"] == "component"
    assert kinds["/Capture/People"] == "group"
    assert all(Usd.ModelAPI(stage.GetPrimAtPath(p)).IsModel() for p in kinds)  # a contiguous model hierarchy
    mesh = UsdGeom.Mesh(stage.GetPrimAtPath("/Capture/Pointmap/Mesh"))
    assert mesh.GetPurposeAttr().Get() == UsdGeom.Tokens.render


def test_mesh_points_primvars_round_trip_every_frame(moving, tmp_path):
    """Points equal the bundle's (in USD's frame) exactly; faces are the GLB/PLY triangulation; every primvar is
    the bundle's pixel value at its vertex."""
    stage = Usd.Stage.Open(str(export_usd(moving, tmp_path / "m.usda").path))
    mesh = UsdGeom.Mesh(stage.GetPrimAtPath("/Capture/Pointmap/Mesh"))
    primvars = UsdGeom.PrimvarsAPI(mesh)
    seq = read_sequence(moving)
    counts = set()
    for number, frame in zip(seq.frame_numbers, seq):
        points, faces, pixels = mesh_expectation(frame)
        counts.add(len(points))
        got = np.asarray(mesh.GetPointsAttr().Get(number))
        np.testing.assert_array_equal(got, points.astype(np.float32))
        np.testing.assert_array_equal(
            np.asarray(mesh.GetFaceVertexIndicesAttr().Get(number)), faces.reshape(-1)
        )
        assert set(np.asarray(mesh.GetFaceVertexCountsAttr().Get(number))) == {3}
        colour = np.asarray(primvars.GetPrimvar("displayColor").Get(number))
        np.testing.assert_allclose(colour, srgb_to_linear(frame.image)[pixels], atol=1e-6)
        np.testing.assert_allclose(
            np.asarray(primvars.GetPrimvar("albedo").Get(number)),
            srgb_to_linear(frame.albedo)[pixels],
            atol=1e-6,
        )
        np.testing.assert_array_equal(
            np.asarray(primvars.GetPrimvar("bodyPartId").Get(number)), frame.seg[pixels]
        )
        np.testing.assert_allclose(
            np.asarray(primvars.GetPrimvar("displayOpacity").Get(number)), frame.alpha[pixels], atol=0
        )
        rows, cols = np.nonzero(pixels)
        st = np.asarray(primvars.GetPrimvar("st").Get(number))
        np.testing.assert_allclose(st[:, 0] * frame.width - 0.5, cols, atol=1e-4)
        np.testing.assert_allclose((1 - st[:, 1]) * frame.height - 0.5, rows, atol=1e-4)
        for name in ("displayColor", "albedo", "bodyPartId", "displayOpacity", "st"):
            assert primvars.GetPrimvar(name).GetInterpolation() == UsdGeom.Tokens.vertex
        lo, hi = np.asarray(mesh.GetExtentAttr().Get(number))
        np.testing.assert_array_equal(lo, points.min(axis=0).astype(np.float32))
        np.testing.assert_array_equal(hi, points.max(axis=0).astype(np.float32))
    assert len(counts) > 1  # the topology really changes from frame to frame


def test_normals_unit_consistent_and_the_bundles(moving, tmp_path):
    stage = Usd.Stage.Open(str(export_usd(moving, tmp_path / "m.usdc").path))
    mesh = UsdGeom.Mesh(stage.GetPrimAtPath("/Capture/Pointmap/Mesh"))
    assert mesh.GetNormalsInterpolation() == UsdGeom.Tokens.vertex
    seq = read_sequence(moving)
    for number, frame in zip(seq.frame_numbers, seq):
        normals = np.asarray(mesh.GetNormalsAttr().Get(number), np.float64)
        points, faces, pixels = mesh_expectation(frame)
        np.testing.assert_allclose(np.linalg.norm(normals, axis=1), 1.0, atol=1e-6)
        stored = frame.normals[pixels] * OPENCV_TO_USD
        has = np.linalg.norm(stored, axis=1) > 0.5
        assert (~has).sum() >= 6  # the patch without normals reached the mesh
        unit = stored[has] / np.linalg.norm(stored[has], axis=1, keepdims=True)
        np.testing.assert_allclose(normals[has], unit, atol=1e-6)
        # consistent: every vertex normal agrees with the faces around it (right-handed winding) and faces the camera
        p = points.astype(np.float64)
        face_n = np.cross(p[faces[:, 1]] - p[faces[:, 0]], p[faces[:, 2]] - p[faces[:, 0]])
        face_n /= np.linalg.norm(face_n, axis=1, keepdims=True)
        for k in range(3):
            assert (np.einsum("ij,ij->i", normals[faces[:, k]], face_n) > 0.5).mean() > 0.99
        assert (np.einsum("ij,ij->i", normals, -p) > 0).all()  # toward the camera at the origin


def test_joints_equal_bundle_keypoints_every_frame(moving, tmp_path):
    """Each track is one Skeleton; its joints' positions at every frame equal the bundle's keypoints_3d (USD
    frame) within 1e-6 m; keypoints without 3D are flagged invalid; a person is invisible where absent."""
    stage = Usd.Stage.Open(str(export_usd(moving, tmp_path / "m.usdc").path))
    cache = UsdSkel.Cache()
    seq = read_sequence(moving)
    frames = list(seq)
    tracks = sorted({p.track_id for f in frames for p in f.people})
    assert tracks == [2, 5]
    tree = joint_tree()
    order = np.array(tree.keypoints)
    assert sorted(tree.keypoints) == list(range(308)) and tree.parents.count(-1) == 1
    assert all(p < j for j, p in enumerate(tree.parents))  # parents first, as UsdSkel requires
    checked = 0
    for track in tracks:
        root = UsdSkel.Root(stage.GetPrimAtPath(f"/Capture/People/Person_{track}"))
        skeleton = UsdSkel.Skeleton(stage.GetPrimAtPath(f"/Capture/People/Person_{track}/Skeleton"))
        query = cache.GetSkelQuery(skeleton)
        assert query and query.GetAnimQuery()
        assert list(skeleton.GetJointsAttr().Get()) == list(tree.paths)
        index = np.asarray(skeleton.GetPrim().GetAttribute("sapiens2:keypointIndex").Get())
        np.testing.assert_array_equal(index, order)
        xform = UsdGeom.Xformable(skeleton.GetPrim()).ComputeLocalToWorldTransform(1)
        assert xform == Gf.Matrix4d(1.0)
        for number, frame in zip(seq.frame_numbers, frames):
            person = next((p for p in frame.people if p.track_id == track), None)
            visible = UsdGeom.Imageable(root).ComputeVisibility(number)
            assert visible == (UsdGeom.Tokens.inherited if person else UsdGeom.Tokens.invisible)
            valid = np.asarray(skeleton.GetPrim().GetAttribute("sapiens2:keypointValid").Get(number))
            if person is None:
                assert not valid.any()
                continue
            transforms = query.ComputeJointSkelTransforms(number)
            got = np.array([np.array(m.ExtractTranslation()) for m in transforms])
            expected = person.keypoints_3d[order].astype(np.float64) * OPENCV_TO_USD  # in joint order
            known = np.isfinite(expected).all(axis=1)
            assert 2 <= (~known).sum() < 308 and known[index == 41] and known[index == 62]
            np.testing.assert_array_equal(valid, known)
            assert np.abs(got[known] - expected[known]).max() <= 1e-6
            assert np.isfinite(got).all()
            scores = np.asarray(skeleton.GetPrim().GetAttribute("sapiens2:keypointScore").Get(number))
            np.testing.assert_allclose(scores, person.keypoints[order, 2], atol=0)
            checked += 1
    assert checked == sum(len(f.people) for f in frames)
    # the wrists crossed: the sign of their x difference changes over the sequence
    q = cache.GetSkelQuery(UsdSkel.Skeleton(stage.GetPrimAtPath("/Capture/People/Person_2/Skeleton")))
    right, left = int(np.flatnonzero(order == 41)[0]), int(np.flatnonzero(order == 62)[0])
    signs = {np.sign(q.ComputeJointSkelTransforms(n)[right].ExtractTranslation()[0]
                     - q.ComputeJointSkelTransforms(n)[left].ExtractTranslation()[0]) for n in seq.frame_numbers}  # fmt: skip
    assert {-1.0, 1.0} <= signs


def test_camera_reproduces_the_intrinsics(moving, tmp_path):
    """Points projected through the USD camera's own frustum land on the pixels the OpenCV intrinsics give."""
    stage = Usd.Stage.Open(str(export_usd(moving, tmp_path / "m.usdc").path))
    camera = UsdGeom.Camera(stage.GetPrimAtPath("/Capture/Camera"))
    frame = read_sequence(moving).load(0)
    gf = camera.GetCamera(1)
    frustum = gf.frustum
    matrix = frustum.ComputeViewMatrix() * frustum.ComputeProjectionMatrix()
    points = frame.points[vertex_pixels(frame.points, frame.mask)].astype(np.float64)
    usd = points * OPENCV_TO_USD
    ndc = np.array([matrix.Transform(Gf.Vec3d(*p)) for p in usd])
    pixels = np.stack([(ndc[:, 0] + 1) / 2 * frame.width, (1 - ndc[:, 1]) / 2 * frame.height], axis=1)
    np.testing.assert_allclose(pixels, _project(points, frame.camera), atol=1e-3)
    near, far = camera.GetClippingRangeAttr().Get()
    depth = points[:, 2]
    assert 0 < near < depth.min() and far > depth.max()
    assert camera.GetProjectionAttr().Get() == UsdGeom.Tokens.perspective


def test_sequence_meshes_live_in_one_clip_file_per_frame(moving, tmp_path):
    """Bounded memory: the stage's own layer holds no mesh data; each frame's mesh is in its own small file."""
    summary = export_usd(moving, tmp_path / "m.usdc")
    assert [p.name for p in summary.clip_files] == [
        f"mesh_{n:04d}.usdc" for n in read_sequence(moving).frame_numbers
    ]
    layer = Sdf.Layer.FindOrOpen(str(summary.path))
    assert layer.ListTimeSamplesForPath("/Capture/Pointmap/Mesh.points") == []
    for clip in summary.clip_files:
        clip_layer = Sdf.Layer.FindOrOpen(str(clip))
        assert len(clip_layer.ListTimeSamplesForPath("/Capture/Pointmap/Mesh.points")) == 1


def test_usdz_holds_everything(moving, tmp_path):
    summary = export_usd(moving, tmp_path / "m.usdz")
    assert summary.path.is_file() and not (tmp_path / "m_frames").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.usdz"]  # no staging left behind
    stage = Usd.Stage.Open(str(summary.path))
    frame = read_sequence(moving).load(6)
    points, _, _ = mesh_expectation(frame)
    mesh = UsdGeom.Mesh(stage.GetPrimAtPath("/Capture/Pointmap/Mesh"))
    np.testing.assert_array_equal(np.asarray(mesh.GetPointsAttr().Get(7)), points.astype(np.float32))


def test_tiny_single_frame_is_a_still_stage(tiny, tmp_path):
    frame = read_bundle(tiny)
    stage = Usd.Stage.Open(str(export_usd(tiny, tmp_path / "t.usda").path))
    mesh = UsdGeom.Mesh(stage.GetPrimAtPath("/Capture/Pointmap/Mesh"))
    points, faces, _ = mesh_expectation(frame)
    assert mesh.GetPointsAttr().GetNumTimeSamples() == 0
    np.testing.assert_array_equal(np.asarray(mesh.GetPointsAttr().Get()), points.astype(np.float32))
    assert len(np.asarray(mesh.GetFaceVertexIndicesAttr().Get())) == faces.size
    assert not UsdGeom.PrimvarsAPI(mesh).GetPrimvar("displayOpacity").HasAuthoredValue()  # no matte here
    skeleton = UsdSkel.Skeleton(stage.GetPrimAtPath("/Capture/People/Person_0/Skeleton"))
    got = np.array(
        [
            np.array(m.ExtractTranslation())
            for m in UsdSkel.Cache().GetSkelQuery(skeleton).ComputeJointSkelTransforms(Usd.TimeCode.Default())
        ]
    )
    expected = frame.people[0].keypoints_3d[list(joint_tree().keypoints)].astype(np.float64) * OPENCV_TO_USD
    known = np.isfinite(expected).all(axis=1)
    assert np.abs(got[known] - expected[known]).max() <= 1e-6


def test_errors_name_the_problem(tiny, tmp_path):
    with pytest.raises(UsdExportError, match=r"\.usd, \.usda, \.usdc, \.usdz"):
        export_usd(tiny, tmp_path / "x.obj")
    with pytest.raises(UsdExportError, match="bundle"):
        export_usd(tmp_path / "x.png", tmp_path / "x.usda")
    with pytest.raises(UsdExportError, match="does not exist"):
        export_usd(tiny, tmp_path / "nowhere" / "x.usda")
    frames = moving_frames(2)
    frames[1] = CaptureFrame(width=8, height=6, points=np.ones((6, 8, 3), np.float32))
    with pytest.raises(UsdExportError, match="same size"):
        export_usd(frames, tmp_path / "x.usdc")


def test_missing_usd_core_says_which_extra(tiny, tmp_path):
    code = (
        "import sys; sys.modules['pxr'] = None\n"
        "from sapiens2_studio.core.formats.usd import export_usd, UsdExportError\n"
        f"try:\n    export_usd({str(tiny)!r}, {str(tmp_path / 'x.usda')!r})\n"
        "except UsdExportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "pip install 'sapiens2-studio[usd]'" in out


def test_cli_export_usd(moving, tiny, tmp_path, capsys):
    from sapiens2_studio.cli.main import main

    assert main(["export", "usd", str(moving), str(tmp_path / "m.usdc"), "--fps", "25"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == str(tmp_path / "m.usdc")
    assert f"{FRAMES} frame(s) 1-{FRAMES} at 25 fps, 2 person(s)" in captured.err
    assert Usd.Stage.Open(str(tmp_path / "m.usdc")).GetTimeCodesPerSecond() == 25
    with pytest.raises(SystemExit) as exc:  # argparse's own usage error
        main(["export", "usd", str(tiny), str(tmp_path / "t.obj")])
    assert exc.value.code == 2 and "OUT must end in .usd" in capsys.readouterr().err
    from sapiens2_studio.cli import export_usd as cli_usd
    from sapiens2_studio.core.formats.usd import USD_SUFFIXES

    assert cli_usd._SUFFIXES == USD_SUFFIXES
    assert main(["export", "usd", str(tmp_path / "missing.json"), str(tmp_path / "t.usda")]) == 1
    assert "missing.json" in capsys.readouterr().err


def test_frame_written_by_the_project_writer_round_trips(tmp_path):
    """A frame written straight from CaptureFrame objects (no sequence index) exports like its bundle."""
    frames = moving_frames(3)
    direct = export_usd(frames, tmp_path / "direct.usdc", fps=FPS)
    json_path = write_bundle(tmp_path, "one", frames[0])
    still = export_usd(json_path, tmp_path / "one.usdc")
    assert direct.frames == 3 and still.frames == 1 and direct.people == 1


def test_frames_in_memory_get_the_bundles_3d_keypoints(moving, tmp_path):
    """Frames built in memory carry 2D keypoints only (ComfyUI, the Python API): the export samples their 3D from
    the points by the bundle writer's rule, so the joints equal those of the stage written from the bundles."""
    frames = moving_frames()
    assert all(p.keypoints_3d is None for f in frames for p in f.people)
    for number, frame in enumerate(frames, start=1):
        frame.frame = number
    memory = Usd.Stage.Open(str(export_usd(frames, tmp_path / "memory.usdc", fps=FPS).path))
    bundles = Usd.Stage.Open(str(export_usd(moving, tmp_path / "bundles.usdc").path))
    compared = 0
    for track in (2, 5):
        path = f"/Capture/People/Person_{track}/Animation"
        ours, theirs = (s.GetPrimAtPath(path).GetAttribute("translations") for s in (memory, bundles))
        for number in range(1, FRAMES + 1):
            np.testing.assert_array_equal(np.asarray(ours.Get(number)), np.asarray(theirs.Get(number)))
            compared += 1
    assert compared == 2 * FRAMES


def test_missing_usd_core_in_comfyui_says_how_to_install_there(tmp_path):
    """ComfyUI's message names ComfyUI's own Python (no CLI extra), through the node's error wrapper."""
    code = (
        "import sys; sys.modules['pxr'] = None\n"
        "from sapiens2_studio.core.formats.usd import require_pxr, UsdExportError\n"
        "try:\n    require_pxr()\n"
        "except UsdExportError as e:\n    print(e.text('comfyui')); print(e.text('cli'))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    comfy, cli = run.stdout.strip().splitlines()
    assert comfy.startswith("USD export needs Pixar's 'usd-core' package, which is not installed")
    assert f"{sys.executable} -m pip install usd-core" in comfy and "restart ComfyUI" in comfy
    assert "sapiens2-studio[usd]" not in comfy and "pip install 'sapiens2-studio[usd]'" in cli


def test_a_node_batch_gives_the_stage_of_the_bundle_sequence_it_saves(tmp_path):
    """One engine for ComfyUI's two writers: `sequence_frames` (what Save USD writes from a batch) and
    `save_sequence_bundle` (Save Capture Bundle) go through the same windows and temporal pass (tracking and, here,
    smoothing of keypoints and pointmap scale), so the stage written from the batch equals the stage exported from
    the bundles: every frame's points, every track's joints."""
    import torch
    from sapiens2_studio.core.formats.usd import write_usd
    from sapiens2_studio.core.pipeline.results import PersonPose, PointmapResult, PoseResult, SegResult
    from sapiens2_studio.core.studio.jobs.sequence_batch import save_sequence_bundle, sequence_frames
    from sapiens2_studio.core.studio.sources.batches import TaskBatch

    frames = moving_frames(7)
    images = torch.from_numpy(np.stack([f.image for f in frames]).astype(np.float32) / 255.0)
    fx, fy, cx, cy = (CAMERA[k] for k in ("fx", "fy", "cx", "cy"))
    batches = {
        "pose": TaskBatch("pose", [PoseResult(people=[PersonPose(bbox=p.bbox, keypoints=p.keypoints)
                                                      for p in f.people], image_size=(W, H)) for f in frames]),
        "seg": TaskBatch("seg", [SegResult(labels=torch.from_numpy(f.seg.astype(np.int64))) for f in frames]),
        "pointmap": TaskBatch("pointmap", [PointmapResult(points=torch.from_numpy(f.points), scale=1.0 + 0.01 * i,
                                                          intrinsics=(fx, fy, cx, cy)) for i, f in enumerate(frames)]),
    }  # fmt: skip

    def numbered(items):
        for number, frame in enumerate(items, start=1):
            frame.frame = number
            yield frame

    batch = sequence_frames(images, batches, fps=FPS, smooth=True, window=3)
    direct = Usd.Stage.Open(str(write_usd(numbered(batch), tmp_path / "batch.usdc", fps=FPS).path))
    index, count = save_sequence_bundle(tmp_path, "saved", images, batches, fps=FPS, smooth=True, window=3)
    assert count == 7
    saved = Usd.Stage.Open(str(export_usd(index, tmp_path / "saved.usdc").path))
    tracks = sorted({p.track_id for f in read_sequence(index) for p in f.people})
    assert len(tracks) == 2
    mesh = "/Capture/Pointmap/Mesh"
    for number in range(1, 8):
        ours, theirs = (
            np.asarray(s.GetPrimAtPath(mesh).GetAttribute("points").Get(number)) for s in (direct, saved)
        )
        assert len(ours) > 100
        np.testing.assert_array_equal(ours, theirs)
        for track in tracks:
            path = f"/Capture/People/Person_{track}/Animation"
            ours, theirs = (np.asarray(s.GetPrimAtPath(path).GetAttribute("translations").Get(number))
                            for s in (direct, saved))  # fmt: skip
            np.testing.assert_array_equal(ours, theirs)
    with pytest.raises(Exception, match="'pointmap' has 2 results for 7 images"):
        sequence_frames(images, {"pointmap": TaskBatch("pointmap", batches["pointmap"].results[:2])}, fps=FPS)
