"""Synthetic video truth for the temporal pass: people with 308 keypoints who walk, swing their limbs at 2-5 Hz,
cross each other, leave the frame and come back, seen through a noisy "detector" and a noisy "pose model".

Why synthetic: the truth is known exactly, so a test can say how much jitter the smoother removes, how many
frames it lags, and whether every person kept their track id. The numbers are chosen to look like a 1080p clip:
people 500-650 px tall, walking at about half a body height per second, keypoint noise of 2 px, box noise of 1 %
of the height, a person behind another not detected while hidden, people cut by the image edge not detected
when less than a third of them is in view.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

WIDTH, HEIGHT, FPS = 1920, 1080, 24.0
K = 308


@dataclass
class Body:
    """One person's keypoint template and limb motion: offsets from the body centre in units of height."""

    height: float
    seed: int
    template: np.ndarray = field(init=False)  # (K, 2)
    amplitude: np.ndarray = field(init=False)  # (K,) fast swing in units of height
    freq: np.ndarray = field(init=False)  # (K,) Hz, 2-5
    phase: np.ndarray = field(init=False)
    slow_amplitude: np.ndarray = field(init=False)  # (K,) the gait's swing in units of height
    slow_freq: np.ndarray = field(init=False)  # (K,) Hz, 0.5-1.5
    slow_phase: np.ndarray = field(init=False)
    group: np.ndarray = field(init=False)  # (K,) 0 torso/head, 1 arms, 2 hands, 3 legs/feet

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        self.group = group = rng.integers(0, 4, K)  # 0 torso/head, 1 arms, 2 hands, 3 legs/feet
        x = rng.uniform(-0.12, 0.12, K)
        y = np.select(
            [group == 0, group == 1, group == 2],
            [rng.uniform(-0.5, 0.0, K), rng.uniform(-0.3, 0.0, K), rng.uniform(-0.05, 0.1, K)],
            rng.uniform(0.05, 0.5, K),
        )
        self.template = np.stack([x, y], -1)
        self.freq = rng.uniform(2.0, 5.0, K)
        # the fast part is limited by the acceleration a body part reaches (m/s², a 1.75 m person): a 2-5 Hz
        # swing as large as a walk's would need 5-10 g. Hands: 14 px at 3 Hz on a 600 px person.
        accel = np.array([2.0, 8.0, 15.0, 10.0])[group] / 1.75  # heights / s²
        self.amplitude = accel / (2 * np.pi * self.freq) ** 2
        self.phase = rng.uniform(0, 2 * np.pi, K)
        self.slow_amplitude = np.array([0.005, 0.04, 0.06, 0.05])[group]
        self.slow_freq = rng.uniform(0.5, 1.5, K)
        self.slow_phase = rng.uniform(0, 2 * np.pi, K)

    def keypoints(self, centre: tuple[float, float], t: float, activity: float = 1.0) -> np.ndarray:
        """(K, 2) true image positions at time t (s) with the body centre at `centre`; `activity` scales the
        limbs' swing (0: standing still). Each point moves on two ellipses: the gait's (0.5-1.5 Hz) and its own
        2-5 Hz one."""
        xy = self.template * self.height
        for amplitude, freq, phase in (
            (self.slow_amplitude, self.slow_freq, self.slow_phase),
            (self.amplitude, self.freq, self.phase),
        ):
            angle = 2 * np.pi * freq * t + phase
            swing = activity * amplitude * self.height
            xy[:, 0] += swing * np.sin(angle)
            xy[:, 1] += 0.3 * swing * np.cos(angle)
        return np.asarray(centre)[None, :] + xy


def box_of(xy: np.ndarray, margin: float = 0.05) -> tuple[float, float, float, float]:
    """A detector's box around keypoints, clipped to the image."""
    (x1, y1), (x2, y2) = xy.min(0), xy.max(0)
    pad = margin * (y2 - y1)
    return (max(0.0, x1 - pad), max(0.0, y1 - pad), min(WIDTH, x2 + pad), min(HEIGHT, y2 + pad))


def visible_fraction(xy: np.ndarray) -> float:
    inside = (xy[:, 0] >= 0) & (xy[:, 0] < WIDTH) & (xy[:, 1] >= 0) & (xy[:, 1] < HEIGHT)
    return float(inside.mean())


@dataclass
class Observation:
    """One detected person in one frame: the truth id, box and keypoints (x, y, score) as a model gives them."""

    truth: int
    bbox: tuple[float, float, float, float]
    keypoints: np.ndarray  # (K, 3) float32
    clean: np.ndarray  # (K, 2) the true positions


def observe(
    truths: list[tuple[int, Body, np.ndarray]],
    rng: np.random.Generator,
    *,
    noise: float = 2.0,
    box_noise: float = 0.01,
    hidden: set[int] = frozenset(),  # type: ignore[assignment]
) -> list[Observation]:
    """A frame's detections, in a shuffled order (a detector's order says nothing about identity)."""
    out = []
    for truth, body, xy in truths:
        if truth in hidden or visible_fraction(xy) < 1 / 3:
            continue
        box = np.asarray(box_of(xy)) + rng.normal(0, box_noise * body.height, 4)
        kp = np.empty((K, 3), dtype=np.float32)
        kp[:, :2] = xy + rng.normal(0, noise, xy.shape)
        kp[:, 2] = 0.9
        out.append(Observation(truth, tuple(float(v) for v in box), kp, xy))  # type: ignore[arg-type]
    order = rng.permutation(len(out))
    return [out[i] for i in order]


def crossing_and_return(frames: int = 240, seed: int = 0) -> list[list[Observation]]:
    """Two people walk towards each other and cross (A in front: B is hidden behind A and not detected while
    their centres are less than a fifth of a height apart), B walks out of the left edge and comes back about
    two seconds later while A, having turned round at the right, walks back towards the middle."""
    rng = np.random.default_rng(seed)
    a, b = Body(620.0, seed + 1), Body(560.0, seed + 2)
    clip = []
    for i in range(frames):
        t = i / FPS
        ax = 400 + 300 * t if t < 4.5 else 400 + 300 * 4.5 - 250 * (t - 4.5)
        if t < 5.0:
            bx = 1500 - 300 * t  # leaves the left edge at about 5 s …
        elif t < 7.0:
            bx = -400.0
        else:
            bx = -150 + 300 * (t - 7.0)  # … and walks back in from the left
        a_xy, b_xy = a.keypoints((ax, 560.0), t), b.keypoints((bx, 580.0), t)
        hidden = {1} if abs(ax - bx) < 0.2 * b.height else set()
        clip.append(observe([(0, a, a_xy), (1, b, b_xy)], rng, hidden=hidden))
    return clip


def walk_with_step(
    frames: int = 240, step_at: int = 180, step: float = 0.25, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, Body]:
    """One person walking across the frame (a quarter of their height per second) with every limb in motion, who
    moves `step` of their height sideways in one frame at `step_at` (a sudden move, or a cut): the smoother must
    follow it at once. Returns (true positions (frames, K, 2), observed keypoints (frames, K, 3) with 2 px noise,
    the body)."""
    rng = np.random.default_rng(seed)
    body = Body(600.0, seed + 7)
    clean = np.empty((frames, K, 2))
    observed = np.empty((frames, K, 3), dtype=np.float32)
    for i in range(frames):
        t = i / FPS
        cx = 500 + 150 * t + (step * body.height if i >= step_at else 0.0)
        clean[i] = body.keypoints((cx, 560.0), t)
        observed[i, :, :2] = clean[i] + rng.normal(0, 2.0, (K, 2))
        observed[i, :, 2] = 0.9
    return clean, observed, body
