"""The throughput work keeps results exact: overlapped writing = sequential writing (every byte, same order), and
each faster step (8-bit preparation, shared dense pre-processing, in-place normal finishing, the sRGB table, the
EXR encoding table) gives the values of the step it replaced. Speed itself is measured in benchmarks/, never here."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from sapiens2_studio.core.formats import bundle as bundle_mod
from sapiens2_studio.core.formats.bundle import CaptureFrame, read_bundle, write_bundle
from sapiens2_studio.core.formats.exr import read_exr, srgb_to_linear, write_exr
from sapiens2_studio.core.pipeline import images as images_mod
from sapiens2_studio.core.pipeline import postprocess
from sapiens2_studio.core.pipeline.postprocess import (
    count_nonfinite,
    normal_lengths,
    normals_to_image,
    uncrop,
    unit_normals,
)
from sapiens2_studio.core.pipeline.preprocess import dense_layout
from sapiens2_studio.core.shading.conventions import model_to_canonical
from sapiens2_studio.core.studio import JobSpec, run_job
from sapiens2_studio.core.studio.errors import StudioError
from sapiens2_studio.core.studio.jobs.pipelining import OrderedWriter, prefetch
from studio_runs import output_bytes, photo

# ------------------------------------------------------------------------------------- overlapped = sequential


def _run(inputs: list[Path], out: Path, checkpoints: dict[str, Path], writers: int) -> list[str]:
    order: list[str] = []
    spec = JobSpec(
        inputs=[str(p) for p in inputs],
        out=str(out),
        tasks=("pose", "seg", "normal", "pointmap"),
        checkpoints={t: checkpoints[t] for t in ("pose", "seg", "normal", "pointmap")},
        device="cpu",
        writers=writers,
    )
    report = run_job(spec, on_item=lambda _, label: order.append(label))
    assert report.ok and report.written == len(order)
    return order


def test_overlapped_writing_gives_the_sequential_bytes_in_the_same_order(
    tmp_path: Path, tiny_checkpoints
) -> None:
    frames = tmp_path / "plate"
    frames.mkdir()
    for number in (11, 12, 13, 14):  # a sequence (numbered frames) with prefetching, plus two stills
        Image.fromarray(photo(40, 30, number)).save(frames / f"shot_{number}.png")
    stills = [tmp_path / "a.png", tmp_path / "b.png"]
    for seed, path in enumerate(stills):
        Image.fromarray(photo(36, 44, 100 + seed)).save(path)
    inputs = [frames, *stills]
    sequential = _run(inputs, tmp_path / "seq", tiny_checkpoints, writers=0)
    overlapped = _run(inputs, tmp_path / "par", tiny_checkpoints, writers=2)
    assert overlapped == sequential == ["a.png", "b.png", "shot #11", "shot #12", "shot #13", "shot #14"]
    expected, got = output_bytes(tmp_path / "seq"), output_bytes(tmp_path / "par")
    assert sorted(got) == sorted(expected) and "shot/shot.sequence.json" in got
    for name, data in expected.items():
        assert got[name] == data, f"{name} differs between writers=0 and writers=2"


def test_job_refuses_a_negative_number_of_writers(tmp_path: Path) -> None:
    with pytest.raises(StudioError, match="writers"):
        JobSpec(inputs=[str(tmp_path)], out=str(tmp_path), writers=-1).validate()


# ------------------------------------------------------------------------------------- the ordered writer pool


def test_writer_commits_in_submission_order_even_when_later_frames_finish_first() -> None:
    release_first = threading.Event()
    finished: list[int] = []
    committed: list[int] = []

    def work(i: int) -> int:
        if i == 0:
            assert release_first.wait(10)
        finished.append(i)
        if i == 2:
            release_first.set()  # frame 0 finishes only after frames 1 and 2
        return i

    with OrderedWriter(2, max_pending=4) as writer:
        for i in range(4):
            writer.submit(lambda i=i: work(i), committed.append)
    assert finished.index(0) > finished.index(2)
    assert committed == [0, 1, 2, 3]


def test_writer_bounds_the_frames_in_flight() -> None:
    alive, peak, lock = [0], [0], threading.Lock()

    def work() -> None:
        with lock:
            alive[0] += 1
            peak[0] = max(peak[0], alive[0])
        threading.Event().wait(0.01)
        with lock:
            alive[0] -= 1

    with OrderedWriter(2, max_pending=3) as writer:
        for _ in range(12):
            writer.submit(work)
            assert len(writer._pending) <= 3
    assert peak[0] <= 2


def test_writer_raises_the_first_failure_in_order_and_commits_nothing_after_it() -> None:
    committed: list[int] = []

    def work(i: int) -> int:
        if i == 1:
            raise OSError("disk full")
        return i

    with pytest.raises(OSError, match="disk full"), OrderedWriter(2) as writer:
        for i in range(6):
            writer.submit(lambda i=i: work(i), committed.append)
    assert committed == [0]


def test_writer_without_workers_runs_inline() -> None:
    seen: list[str] = []
    with OrderedWriter(0) as writer:
        writer.submit(
            lambda: seen.append(threading.current_thread().name) or 7, lambda r: seen.append(str(r))
        )
        assert seen == [threading.current_thread().name, "7"]


# ------------------------------------------------------------------------------------------------- prefetching


def test_prefetch_keeps_order_and_raises_where_the_source_failed() -> None:
    def frames():
        yield from range(5)
        raise ValueError("frame 6 is broken")

    got = []
    with pytest.raises(ValueError, match="frame 6"):
        for item in prefetch(frames(), depth=2):
            got.append(item)
    assert got == [0, 1, 2, 3, 4]
    assert list(prefetch(iter(range(4)), depth=0)) == [0, 1, 2, 3]


def test_prefetch_stops_and_closes_the_source_when_the_consumer_stops() -> None:
    produced, closed = [], threading.Event()

    def frames():
        try:
            for i in range(1000):
                produced.append(i)
                yield i
        finally:
            closed.set()

    stream = prefetch(frames(), depth=2)
    assert [next(stream), next(stream)] == [0, 1]
    stream.close()
    assert closed.wait(5)
    assert len(produced) <= 2 + 2 + 1  # consumed + depth + the one blocked in put


# ------------------------------------------------------------------------------------- faster steps, same values


def test_8bit_preparation_matches_the_general_path() -> None:
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (37, 53, 3), dtype=np.uint8)
    fast = images_mod.ImageSource([image]).get(0)
    data, quantized = images_mod._from_numpy(image, 0, "composite")
    assert quantized and fast.quantized
    assert torch.equal(fast.pixels.float(), torch.from_numpy(data).permute(2, 0, 1).contiguous())


def test_in_place_normal_finishing_matches_the_reference_formula() -> None:
    for width, height in ((768, 1024), (300, 500), (1920, 1080), (33, 61)):
        layout = dense_layout(width, height)
        raw = torch.randn(1, 3, 1024, 768)
        resized = uncrop(unit_normals(raw), layout)
        x, y, z = resized.unbind(dim=1)
        length = (x * x + y * y + z * z).sqrt().clamp(min=1e-8)[:, None]  # the formula, in plain float32
        reference = model_to_canonical(resized / length, dim=-3)
        finished = normals_to_image(raw.clone(), layout)
        torch.testing.assert_close(finished, reference, rtol=0, atol=2e-7)  # fused multiply-adds: ≤ 1 ulp
        assert torch.equal(finished, model_to_canonical(resized / normal_lengths(resized), dim=-3))


def test_nonfinite_count_is_exact_for_every_kind_and_place() -> None:
    def reference(x: torch.Tensor) -> int:
        return int((~torch.isfinite(x)).sum()) if x.is_floating_point() else 0

    base = torch.randn(37, 53, 3)
    cases = [base, base.half(), base.to(torch.bfloat16), base[:, ::2, 1], torch.empty(0, 3), torch.arange(12)]
    for bad in (float("nan"), float("inf"), float("-inf")):
        for where in ((0, 0, 0), (36, 52, 2), (18, 7, 1)):
            x = base.clone()
            x[where] = bad
            cases.append(x)
        y = base.clone()
        y[::5, ::3] = bad
        cases += [y, y.permute(2, 0, 1)]
    channels_first = torch.randn(3, 37, 53)
    channels_first[1, 5, 9] = float("nan")
    cases.append(channels_first.permute(1, 2, 0))  # a dense result's (H, W, 3) view of its (3, H, W) map
    for x in cases:
        assert count_nonfinite(x) == reference(x)
    # the whole-map reduction reads such a view in memory order instead of copying it (648 MB at 9000×6000)
    assert postprocess._memory_order(channels_first.permute(1, 2, 0)).is_contiguous()
    assert postprocess._memory_order(base[:, ::2, 1]).shape == base[:, ::2, 1].shape  # no order: as it is


def test_dense_tasks_share_one_preprocessing(monkeypatch: pytest.MonkeyPatch, tiny_checkpoints) -> None:
    import importlib

    from sapiens2_studio.core.studio.compute.run_tasks import run_tasks
    from sapiens2_studio.core.studio.runtime.models import load

    predict_mod = importlib.import_module(
        "sapiens2_studio.core.pipeline.predict"
    )  # the package re-exports `predict`
    calls: list[tuple[int, ...]] = []
    original = predict_mod.preprocess_dense

    def counting(pixels, *, quantize):
        calls.append(tuple(pixels.shape))
        return original(pixels, quantize=quantize)

    models = {t: load(tiny_checkpoints[t], task=t, device="cpu") for t in ("normal", "pointmap")}
    image = photo(30, 20, 3)
    separate = {t: run_tasks({t: m}, [image])[t].results[0] for t, m in models.items()}
    monkeypatch.setattr(predict_mod, "preprocess_dense", counting)
    both = run_tasks(models, [image])
    assert len(calls) == 1  # normal and pointmap resized and padded the image once
    assert torch.equal(both["normal"].results[0].normals, separate["normal"].normals)
    assert torch.equal(both["pointmap"].results[0].points, separate["pointmap"].points)


def test_srgb_table_matches_the_float_path() -> None:
    levels = np.arange(256, dtype=np.uint8).reshape(16, 16, 1).repeat(3, axis=2)
    assert np.array_equal(bundle_mod._as_linear("image", levels), srgb_to_linear(levels / np.float32(255.0)))


def test_bundles_follow_the_encoding_table_and_other_pixel_types_still_read(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    seg = rng.integers(0, 29, (12, 10))
    write_bundle(tmp_path, "f", CaptureFrame(10, 12, seg=seg, mask=(seg > 0).astype(np.float32)))
    channels, header = read_exr(tmp_path / "f.exr")
    assert channels["seg.id"].dtype == bundle_mod.LAYER_ENCODING.pixel_types["seg"]
    assert channels["mask.A"].dtype == bundle_mod.LAYER_ENCODING.pixel_types["mask"]
    assert header["compression"].name.lower().startswith(bundle_mod.LAYER_ENCODING.compression)
    channels["seg.id"] = channels["seg.id"].astype(
        np.float16
    )  # another writer's choice: readers take any type
    channels["mask.A"] = channels["mask.A"].astype(np.float32)
    write_exr(tmp_path / "f.exr", channels, {"sapiens2Capture": "1.1"})
    frame = read_bundle(tmp_path / "f.json")
    assert np.array_equal(frame.seg, seg) and np.array_equal(frame.mask, (seg > 0).astype(np.float32))


def test_cli_writers_flag_reaches_the_job() -> None:
    from sapiens2_studio.cli.arguments import build_parser
    from sapiens2_studio.cli.predict import job_spec

    parser = build_parser()
    assert job_spec(parser.parse_args(["predict", "a.png", "--out", "o", "--writers", "0"])).writers == 0
    assert job_spec(parser.parse_args(["predict", "a.png", "--out", "o"])).writers == JobSpec.writers
    with pytest.raises(SystemExit):
        parser.parse_args(["predict", "a.png", "--out", "o", "--writers", "-1"])


def test_a_consumed_capture_equals_a_copied_one(tiny_checkpoints) -> None:
    """The job's capture takes the model results over (`consume=True`: points masked in their own memory, the
    int64 labels released for the frame's int32 ones); the frame it builds equals the copying capture's."""
    from sapiens2_studio.core.studio.compute.capture import capture_frames
    from sapiens2_studio.core.studio.compute.run_tasks import run_tasks
    from sapiens2_studio.core.studio.runtime.models import load

    tasks = ("seg", "pose", "normal", "pointmap")
    models = {t: load(tiny_checkpoints[t], task=t, device="cpu") for t in tasks}
    image = photo(40, 30, 5)
    copied = capture_frames([image], run_tasks(models, [image]))[0]
    batches = run_tasks(models, [image])
    consumed = capture_frames([image], batches, consume=True)[0]
    for name in ("seg", "mask", "normals", "points"):
        ours, theirs = getattr(consumed, name), getattr(copied, name)
        assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs), name
    assert consumed.checks == copied.checks and consumed.camera == copied.camera
    labels = batches["seg"].results[0].labels
    assert labels.dtype == torch.int32 and np.shares_memory(labels.numpy(), consumed.seg)
    assert np.shares_memory(batches["pointmap"].results[0].points.numpy(), consumed.points)
