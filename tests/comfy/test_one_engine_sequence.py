"""One engine for a sequence: the same 30-frame clip with two people gives the same keypoints, scores, track ids,
pointmap scales and sequence bundles through `sapiens2 predict --smooth` and through ComfyUI's Pose (smooth) →
Save Capture Bundle (smooth) in a real server; and a VIDEO of those frames gives what the IMAGE batch gives.

The CLI reads the frames as numbered PNGs, ComfyUI the same PNGs through core LoadImage + ImageBatch (exact
copies; a multi-page TIFF is one frame on 0.33.0, whose LoadImage decodes with PyAV first); the boxes are the same per-frame boxes (the CLI's --boxes file, the test box source).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("OpenEXR")
pytestmark = pytest.mark.comfyui

FRAMES = 30
FPS = 24.0


def _loader(task: str) -> dict:
    inputs = {"checkpoint": f"sapiens2_1b_{task}.safetensors", "download_task": task, "download_size": "1b"}
    return {
        "class_type": "Sapiens2ModelLoader",
        "inputs": {**inputs, "dtype": "auto", "attention": "auto", "compile": False},
    }


def _pose(image: list, **extra) -> dict:
    return {
        "class_type": "Sapiens2Pose",
        "inputs": {
            "model": ["2", 0],
            "image": image,
            "bboxes": ["4", 0],
            "flip_test": True,
            "keypoint_format": "core (real scores)",
            "neck_mode": "auto",
            "score_threshold": 0.3,
            "chunk_size": 4,
            "smooth": True,
            **extra,
        },
    }


def _bundle(image: list, pose: list, prefix: str, **extra) -> dict:
    return {
        "class_type": "Sapiens2SaveCaptureBundle",
        "inputs": {
            "image": image,
            "filename_prefix": prefix,
            "pose": pose,
            "pointmap": ["6", 0],
            "smooth": True,
            **extra,
        },
    }


def _frame_batch(names: list[str]) -> dict:
    """Nodes giving the frames as one IMAGE batch, in order, as node "1": LoadImage each, ImageBatch them."""
    nodes = {f"load{i}": {"class_type": "LoadImage", "inputs": {"image": n}} for i, n in enumerate(names)}
    last = ["load0", 0]
    for i in range(1, len(names)):
        node = "1" if i == len(names) - 1 else f"batch{i}"
        nodes[node] = {"class_type": "ImageBatch", "inputs": {"image1": last, "image2": [f"load{i}", 0]}}
        last = [node, 0]
    return nodes


def _prompt(frames: list[str], boxes: list) -> dict:
    boxes_json = [
        [{"x": b[0], "y": b[1], "width": b[2] - b[0], "height": b[3] - b[1]} for b in frame]
        for frame in boxes
    ]
    return {
        **_frame_batch(frames),
        "2": _loader("pose"),
        "3": _loader("pointmap"),
        "4": {"class_type": "TestBoxSource", "inputs": {"boxes": json.dumps(boxes_json)}},
        "5": _pose(["1", 0], fps=FPS),
        "6": {
            "class_type": "Sapiens2Pointmap",
            "inputs": {
                "model": ["3", 0],
                "image": ["1", 0],
                "chunk_size": 4,
                "near_is_bright": True,
                "normalize_per_image": False,
            },
        },
        "7": _bundle(["1", 0], ["5", 1], "seq/image", fps=FPS),
        # the same frames as ComfyUI's core VIDEO: its frame rate (fps 0 = the video's) and frames
        "8": {"class_type": "CreateVideo", "inputs": {"images": ["1", 0], "fps": FPS}},
        "9": _pose(["8", 0], fps=0.0),
        "10": _bundle(["8", 0], ["9", 1], "seq/video", fps=0.0),
    }


def _people(frame) -> list:
    return [
        (
            p.track_id,
            p.bbox,
            p.bbox_source,
            p.keypoints.tobytes(),
            np.nan_to_num(p.keypoints_3d, nan=-1.0).tobytes(),
        )
        for p in frame.people
    ]


@pytest.fixture(scope="module")
def runs(client, comfy_server, comfy_harness, tmp_path_factory):
    from sapiens2_studio.cli.main import main
    from sapiens2_studio.core.formats.sequence import read_sequence

    work = tmp_path_factory.mktemp("one_engine_sequence")
    images, boxes = comfy_harness.two_person_clip(FRAMES)
    paths = comfy_harness.write_clip_frames(work / "frames", "clip", images)
    inputs = comfy_harness.write_clip_frames(comfy_server.base / "input", "seqclip", images)

    entry = client.run(_prompt([p.name for p in inputs], boxes), timeout=900)
    assert comfy_harness.execution_error(entry) is None, comfy_harness.execution_error(entry)

    boxes_file = work / "boxes.json"
    boxes_file.write_text(json.dumps({p.name: b for p, b in zip(paths, boxes)}))
    models = comfy_server.base / "models" / "sapiens2"
    argv = ["predict", str(work / "frames"), "--tasks", "pose,pointmap", "--out", str(work / "cli")]
    argv += ["--device", "cpu", "--boxes", str(boxes_file), "--smooth", "--fps", str(FPS), "--no-previews"]
    argv += ["--batch-size", "4"]  # the nodes' chunk_size: the same forward passes
    for task in ("pose", "pointmap"):
        argv += ["--checkpoint", f"{task}={models / f'sapiens2_1b_{task}.safetensors'}"]
    assert main(argv) == 0

    def comfy_sequence(prefix: str):
        found = sorted((comfy_server.base / "output").rglob(f"{prefix}_*.sequence.json"))
        assert len(found) == 1, (
            found,
            sorted((comfy_server.base / "output").rglob("*"))[:20],
            entry["outputs"],
        )
        return read_sequence(found[0])

    (cli_index,) = (work / "cli").rglob("*.sequence.json")
    outputs = entry["outputs"]
    return {
        "cli": read_sequence(cli_index),
        "image": comfy_sequence("image"),
        "video": comfy_sequence("video"),
        "pose_json": {node: outputs[node]["openpose_json"][0] for node in ("5", "9")},
        "cli_fps": json.loads(cli_index.read_text())["fps"],
        "comfy_fps": [
            json.loads(next((comfy_server.base / "output" / "seq").glob(f"{p}_*.sequence.json")).read_text())[
                "fps"
            ]
            for p in ("image", "video")
        ],
    }


def _frames(sequence) -> list:
    return list(sequence)


@pytest.mark.parametrize("other", ["image", "video"])
def test_the_clip_gives_the_same_tracked_smoothed_people_and_scales(runs, other):
    cli, comfy = _frames(runs["cli"]), _frames(runs[other])
    assert len(cli) == len(comfy) == FRAMES
    ids = set()
    for i, (a, b) in enumerate(zip(cli, comfy)):
        assert len(a.people) == 2, f"frame {i + 1}: the clip has two people"
        for p, q in zip(a.people, b.people):
            np.testing.assert_array_equal(p.keypoints, q.keypoints, err_msg=f"frame {i + 1}: keypoints")
        assert _people(a) == _people(b), f"frame {i + 1} differs"
        assert a.pointmap_scale == b.pointmap_scale and a.camera == b.camera, f"frame {i + 1}"
        assert np.array_equal(a.points, b.points, equal_nan=True), f"frame {i + 1}: points"
        ids |= {p.track_id for p in a.people}
    assert ids == {0, 1}, "two tracks through the whole clip"
    scales = [f.pointmap_scale for f in cli]
    assert len(set(scales)) > 1, "the scale moves (smoothed, not constant)"
    assert runs["cli_fps"] == runs["comfy_fps"][0] == runs["comfy_fps"][1] == FPS


def test_video_input_gives_what_the_image_batch_gives(runs):
    assert runs["pose_json"]["5"] == runs["pose_json"]["9"]
    frames = json.loads(runs["pose_json"]["5"])
    assert len(frames) == FRAMES
    assert all(sorted(p["person_id"][0] for p in f["people"]) == [0, 1] for f in frames)
