"""A job works a checkpoint's identity out once (issue 27, item 4): the plan's identity is the one the loaded
model carries, the skip-existing expectation and the bundle's `models` entry read its sha256, and a second run
that keeps every frame finds the same sha256 without loading anything."""

from __future__ import annotations

import hashlib
import json

import numpy as np
from PIL import Image
from sapiens2_studio.core.studio import JobSpec
from sapiens2_studio.core.studio.jobs.job import PredictJob
from sapiens2_studio.core.testing.synthetic import write_synthetic_checkpoint


def _spec(tmp_path, checkpoints, inputs):
    return JobSpec(
        inputs=inputs,
        out=str(tmp_path / "out"),
        tasks=("pose", "normal"),
        checkpoints=checkpoints,
        checkpoint_dir=str(tmp_path / "home"),
        device="cpu",
        flip_test=False,
        allow_download=False,
        writers=0,
        skip_existing=True,
        previews=False,
    )


def test_a_job_identifies_each_checkpoint_once(tmp_path):
    rng = np.random.default_rng(0)
    image = tmp_path / "a.png"
    Image.fromarray(rng.integers(0, 256, (40, 32, 3), dtype=np.uint8)).save(image)
    checkpoints = {
        task: write_synthetic_checkpoint(tmp_path / f"{task}.safetensors", task=task, seed=seed)
        for seed, task in enumerate(("pose", "normal"))
    }
    job = PredictJob(_spec(tmp_path, checkpoints, [str(image)]))
    job.prepare()
    identities = dict(job.plan.checkpoints)
    assert job.plan.paths == checkpoints
    report = job.run()
    assert report.written == 1 and not report.failures
    for task, identity in identities.items():
        assert job.models[task].identity is identity  # the loader read the plan's identity, not the file
        assert job.cache.identity(checkpoints[task], task=task, hash_home=tmp_path / "home") is identity
    digests = {t: hashlib.sha256(p.read_bytes()).hexdigest() for t, p in checkpoints.items()}
    bundle = json.loads((tmp_path / "out" / "a.json").read_text(encoding="utf-8"))
    assert {m["task"]: m["sha256"] for m in bundle["models"]} == digests

    again = PredictJob(_spec(tmp_path, checkpoints, [str(image)]))
    kept = again.run()
    assert kept.skipped == 1 and kept.written == 0 and again.models == {}  # nothing loaded: the shas matched
    assert {t: i.sha256 for t, i in again.plan.checkpoints.items()} == digests
