"""The timing seam (core/timing.py): a real predict job on tiny official-layout checkpoints reports every stage it
runs, with sane wall and CPU seconds, to its host and into its run record (`JobReport.stages`); the benchmarks'
expected stage set is what the engine reports, so a renamed stage fails here, not silently in a benchmark.
Speed itself is measured in benchmarks/ (bench_pipeline.py ab), never here."""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from sapiens2_studio.core import timing
from sapiens2_studio.core.studio import JobSpec, run_job
from sapiens2_studio.core.studio.runtime.host import Host

REPO = Path(__file__).resolve().parents[2]
TASKS = ("pose", "seg", "normal", "pointmap")

# What a job of TASKS on a sequence and a still reports (names as docs/performance.md's tables use them).
EXPECTED = {
    "load",
    "decode",
    "prepare",
    "seg.preprocess",
    "seg.normalize",
    "seg.forward",
    "seg.post",
    "seg.other",
    "pose.boxes",
    "pose.preprocess",
    "pose.normalize",
    "pose.forward",
    "pose.decode",
    "pose.other",
    "normal.preprocess",  # the dense tasks' shared pre-processing, charged to the first of them
    "normal.normalize",
    "normal.forward",
    "normal.post",
    "normal.other",
    "pointmap.normalize",
    "pointmap.forward",
    "pointmap.post",
    "pointmap.other",
    "capture",
    "checks",
    "temporal",
    "previews.render",
    "previews.png",
    "keypoints_json",
    "bundle.exr",
    "bundle.json",
    "write.other",
    "job.other",
}


def _photo(h: int, w: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    body = ((yy - h / 2) ** 2 / (0.4 * h) ** 2 + (xx - w / 2) ** 2 / (0.2 * w) ** 2) < 1
    image = np.stack([60 + 100 * body, 80 + 50 * body, 120 - 40 * body], -1) + rng.integers(0, 30, (h, w, 3))
    return image.astype(np.uint8)


def _inputs(folder: Path) -> list[Path]:
    plate = folder / "plate"
    plate.mkdir()
    for number in (1, 2):  # a sequence: the temporal pass runs
        Image.fromarray(_photo(40, 30, number)).save(plate / f"shot_{number:04d}.png")
    still = folder / "still.png"
    Image.fromarray(_photo(36, 44, 7)).save(still)
    return [plate, still]


def _job(tmp_path: Path, checkpoints: dict[str, Path], writers: int, host: Host) -> tuple[object, float]:
    spec = JobSpec(
        inputs=[str(p) for p in _inputs(tmp_path)],
        out=str(tmp_path / "out"),
        tasks=TASKS,
        checkpoints={t: checkpoints[t] for t in TASKS},
        device="cpu",
        writers=writers,
    )
    start = time.perf_counter()
    report = run_job(spec, host=host)
    return report, time.perf_counter() - start


@pytest.fixture(scope="module")
def sequential(tmp_path_factory, tiny_checkpoints):
    """One sequential job (writers=0) and what its host heard, stage by stage."""
    heard: list[tuple[str, float, float, str]] = []

    def on_stage(name: str, wall: float, cpu: float) -> None:
        heard.append((name, wall, cpu, threading.current_thread().name))

    host = Host("cpu", on_note=None, on_stage=on_stage)
    report, outer = _job(tmp_path_factory.mktemp("seq"), tiny_checkpoints, 0, host)
    assert report.ok, report.failures
    return report, outer, heard


def test_every_stage_is_reported_with_sane_times(sequential) -> None:
    report, outer, _ = sequential
    assert set(report.stages) >= EXPECTED, f"missing: {sorted(EXPECTED - set(report.stages))}"
    cores = os.cpu_count() or 1
    for name, entry in report.stages.items():
        assert entry.calls >= 1, name
        assert 0.0 <= entry.wall <= outer, (name, entry)
        # CPU seconds are the process's (torch's threads too): at most every core for the whole stage
        assert 0.0 <= entry.cpu <= entry.wall * cores + 0.05, (name, entry)
    frames = 3  # two sequence frames and the still
    for per_frame in ("decode", "capture", "write.other", "bundle.exr", "bundle.json", "temporal"):
        expected_calls = 2 if per_frame == "temporal" else frames
        assert report.stages[per_frame].calls == expected_calls, per_frame
    assert report.stages["job.other"].calls == 1


def test_times_are_exclusive_so_the_stages_add_up_to_the_job(sequential) -> None:
    """Sequentially, every stage runs on the job's thread inside `job.other`: the exclusive times add up to the
    job's run (its set-up before the run, `prepare`, is outside it)."""
    report, outer, _ = sequential
    total = sum(entry.wall for entry in report.stages.values())
    assert total <= outer + 1e-3
    assert total >= 0.5 * outer  # checkpoint headers and inputs are read before the run; the rest is stages


def test_the_host_hears_each_stage_and_the_run_record_keeps_the_totals(sequential) -> None:
    report, _, heard = sequential
    summed: dict[str, timing.StageTime] = {}
    for name, wall, cpu, _thread in heard:
        timing.add_stage(summed, name, wall, cpu)
    assert set(summed) == set(report.stages)
    for name, entry in report.stages.items():
        assert summed[name].calls == entry.calls
        assert summed[name].wall == pytest.approx(entry.wall)
        assert summed[name].cpu == pytest.approx(entry.cpu)
    assert {thread for *_, thread in heard} == {threading.current_thread().name}  # writers=0: one thread


def test_writer_threads_report_their_stages(tmp_path: Path, tiny_checkpoints) -> None:
    threads: dict[str, set[str]] = {}

    def on_stage(name: str, wall: float, cpu: float) -> None:
        threads.setdefault(name, set()).add(threading.current_thread().name)

    report, _ = _job(tmp_path, tiny_checkpoints, 2, Host("cpu", on_note=None, on_stage=on_stage))
    assert report.ok, report.failures
    assert set(report.stages) >= EXPECTED
    for name in ("write.other", "bundle.exr", "bundle.json"):
        assert report.stages[name].calls == 3
        assert all(t.startswith("sapiens2-writer") for t in threads[name]), threads[name]


def test_the_benchmark_expects_exactly_what_the_engine_reports(sequential) -> None:
    """benchmarks/stage_profile.py fails on a missing stage; its expectation must hold for the real engine."""
    spec = importlib.util.spec_from_file_location("stage_profile", REPO / "benchmarks" / "stage_profile.py")
    profile = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(profile)
    report, *_ = sequential
    expected = profile.expected_stages(TASKS, previews=True, sequence=True)
    profile.require_stages(report.stages, expected)
    assert expected <= EXPECTED | {"bundle.channels"}
    with pytest.raises(profile.MissingStagesError, match=r"pose\.decode"):
        profile.require_stages(set(report.stages) - {"pose.decode"}, expected)


def test_nested_stages_are_exclusive_and_nobody_listening_costs_nothing() -> None:
    assert timing.stage("decode") is timing.stage("capture")  # one shared no-op when nobody listens
    assert not timing.active()
    heard: dict[str, timing.StageTime] = {}
    with timing.listening(lambda n, w, c: timing.add_stage(heard, n, w, c)):
        assert timing.active()
        with timing.stage("outer"):
            time.sleep(0.02)
            with timing.stage("inner"):
                time.sleep(0.05)
    assert not timing.active()
    assert heard["inner"].wall >= 0.05
    assert 0.02 <= heard["outer"].wall < 0.05  # the inner stage's time is not the outer's
    assert heard["inner"].cpu < heard["inner"].wall  # sleeping costs no CPU


def test_work_on_another_thread_is_heard_only_when_handed_over() -> None:
    heard: list[str] = []
    with timing.listening(lambda n, w, c: heard.append(n)):

        def work(name: str) -> None:
            with timing.stage(name):
                pass

        plain = threading.Thread(target=work, args=("lost",))
        handed = threading.Thread(target=timing.in_context(work), args=("kept",))
        for thread in (plain, handed):
            thread.start()
            thread.join()
    assert heard == ["kept"]


def test_a_work_unit_carries_its_stage_totals(tmp_path: Path, tiny_checkpoints) -> None:
    """A distributed run's unit (what a Ray actor runs, here in this process) returns its run record's stage
    totals as plain data; the driver adds every unit's into its report (`ray_engine._collect`)."""
    from sapiens2_studio.core.studio.engines.ray_engine import _collect
    from sapiens2_studio.core.studio.engines.units import run_unit, split_work
    from sapiens2_studio.core.studio.jobs.job import JobReport, Member, PredictJob
    from sapiens2_studio.core.studio.runtime import models
    from sapiens2_studio.core.studio.store.resume import RunInfo

    folder = tmp_path / "stills"
    folder.mkdir()
    for seed in range(2):
        Image.fromarray(_photo(36, 44, seed)).save(folder / f"still_{seed}.png")
    spec = JobSpec(
        inputs=[folder],
        out=tmp_path / "o",
        tasks=("seg",),
        checkpoints={"seg": tiny_checkpoints["seg"]},
        device="cpu",
        previews=False,
    )
    job = PredictJob(spec)
    job.prepare()
    units = split_work(job.jobs, workers=2)
    member = Member(RunInfo.new(), models.ModelCache())
    results = [run_unit(spec, unit, member, job.paths) for unit in units]
    assert len(results) == 2 and all(r.stages["seg.forward"].calls == 1 for r in results)
    report = JobReport(tmp_path / "o")
    _collect(report, results, [], [])
    assert report.stages["seg.forward"].calls == 2
    assert report.stages["decode"].wall == pytest.approx(sum(r.stages["decode"].wall for r in results))
