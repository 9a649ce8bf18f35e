"""Cross-task geometry checks: do the predictions for one image agree with each other?

There is no ground truth at inference time, but tasks predicted from the same image must be consistent: the
normals are the orientation of the pointmap's surface, the visible surface of a person faces the camera,
confident keypoints lie on the segmented person, and the pointmap is valid where the person is. A wrong normal
convention (y and z flipped) or a mismatched checkpoint shows up at once as a negative mean cosine or a low
share — so these numbers are what a user with real weights looks at first (docs/conventions.md).

Pure, host-neutral functions on the typed results of `core.pipeline.results` or plain arrays (torch or numpy,
channel-last). Cost is bounded: dense maps are sliced on a strided grid of at most `max_side` samples per side
before anything leaves the device, so a 4K frame costs what a 256×192 one does. The report is a frozen dataclass
whose `to_dict()` is what the capture bundle stores under `checks` (docs/formats.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ...formats.arrays import all_finite, to_numpy
from ...shading.conventions import MODEL_NORMAL_FRAME
from ..errors import StudioError

__all__ = [
    "CHECKS_VERSION",
    "CheckError",
    "CheckThresholds",
    "GeometryReport",
    "NormalAgreement",
    "Share",
    "camera_facing_share",
    "check_geometry",
    "compare_normals_to_pointmap",
    "grid_stride",
    "keypoints_in_mask_share",
    "normals_from_pointmap",
    "pointmap_valid_share",
]

CHECKS_VERSION = 1  # layout of `GeometryReport.to_dict()`; bump when a field changes meaning

# Sign patterns tried on the predicted normals, identity first: the best one names the frame that fits.
SIGN_CANDIDATES: tuple[tuple[int, int, int], ...] = tuple(
    (sx, sy, sz) for sx in (1, -1) for sy in (1, -1) for sz in (1, -1)
)

# Warning texts (format fields in braces); hosts may match on the text before the first parenthesis.
WARN_NORMALS_FLIPPED = (
    "normals look flipped against the pointmap (mean cosine {cosine:.2f}) — convention or checkpoint mismatch"
)
WARN_NORMALS_DISAGREE = (
    "normals disagree with the pointmap's surface (mean cosine {cosine:.2f}, expected ≥ {minimum:.2f}) — "
    "check that both came from the same image and from Sapiens2 normal and pointmap checkpoints"
)
WARN_NORMALS_SIGNS = (
    "normals match the pointmap best with their axes multiplied by {signs} (mean cosine {best:.2f}): the "
    "model's normal frame may not be '{frame}' as assumed — see docs/conventions.md"
)
WARN_FACING_AWAY = (
    "only {share:.0%} of the person's normals face the camera (expected ≥ {minimum:.0%}) — the normals' z sign "
    "looks wrong (convention or checkpoint mismatch)"
)
WARN_KEYPOINTS_OUTSIDE = (
    "only {share:.0%} of confident keypoints lie on the segmented person (expected ≥ {minimum:.0%}) — pose and "
    "segmentation disagree (another image, wrong boxes, or a checkpoint mismatch)"
)
WARN_POINTMAP_INVALID = (
    "the pointmap is valid (finite, Z > 0) on only {share:.0%} of the person (expected ≥ {minimum:.0%}) — a "
    "pointmap in another frame or a broken checkpoint"
)


class CheckError(StudioError):
    """Inputs to the geometry checks that do not fit together (shapes, sizes, kinds of result)."""


@dataclass(frozen=True)
class CheckThresholds:
    """When a number is poor enough to warn. Defaults leave room for real predictions: a user of real weights
    reported a mean cosine of 0.81 between Sapiens normals and rendered ones once the frame was right, 0.31
    with it wrong; the other checks are near 1 for any sane prediction."""

    min_normal_cosine: float = 0.5  # below: the normals and the pointmap disagree
    flipped_normal_cosine: float = 0.0  # below: they point the opposite way (flipped)
    signs_margin: float = 0.2  # another sign pattern beats identity by this much: name it
    min_camera_facing: float = 0.5
    min_keypoints_in_mask: float = 0.7
    min_pointmap_valid: float = 0.9
    keypoint_score: float = 0.3  # "confident" (the official visualiser's threshold)
    keypoint_radius: float = 0.01  # tolerance around the mask, as a fraction of the image's longer side
    max_slant_deg: float = 80.0  # pointmap steps steeper than this are depth discontinuities, not surface
    max_depth_jump: float = 0.1  # … and so are steps larger than this fraction of the depth
    min_samples: int = 64  # fewer grid samples than this: report the number, but never warn
    min_keypoints: int = 5  # the same for confident keypoints


@dataclass(frozen=True)
class NormalAgreement:
    """Predicted normals vs normals derived from the pointmap, over the person, on the check grid."""

    mean_cosine: float | None
    samples: int
    best_signs: tuple[int, int, int] | None = None  # the sign pattern with the highest mean cosine
    best_mean_cosine: float | None = None


@dataclass(frozen=True)
class Share:
    """A fraction in [0, 1] of `samples` things (grid pixels or keypoints); None when there were none."""

    share: float | None
    samples: int


@dataclass(frozen=True)
class GeometryReport:
    """What `check_geometry` measured; a check that could not run (a task missing) is None.

    `mask_source`: where "the person" came from: "mask" (given), "seg", "normal" / "pointmap" (the result's own
    mask) or "none" (the whole image). `grid_stride`: the sampling step in pixels of the dense checks."""

    mask_source: str
    grid_stride: int
    normals_vs_pointmap: NormalAgreement | None = None
    normals_facing_camera: Share | None = None
    keypoints_in_mask: Share | None = None
    pointmap_valid_in_mask: Share | None = None
    thresholds: CheckThresholds = field(default_factory=CheckThresholds)
    warnings: tuple[str, ...] = ()
    version: int = CHECKS_VERSION

    @property
    def ok(self) -> bool:
        return not self.warnings

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (plain dicts, lists, floats, None), the bundle's `checks` object."""
        out = asdict(self)
        out["warnings"] = list(self.warnings)
        agreement = out["normals_vs_pointmap"]
        if agreement is not None and agreement["best_signs"] is not None:
            agreement["best_signs"] = list(agreement["best_signs"])
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GeometryReport:
        """Inverse of `to_dict` (unknown keys are ignored, so newer reports still load)."""
        try:
            agreement = data.get("normals_vs_pointmap")
            if agreement is not None:
                signs = agreement.get("best_signs")
                agreement = NormalAgreement(
                    agreement.get("mean_cosine"),
                    int(agreement.get("samples", 0)),
                    None if signs is None else tuple(int(s) for s in signs),  # type: ignore[arg-type]
                    agreement.get("best_mean_cosine"),
                )
            shares = {
                name: None
                if data.get(name) is None
                else Share(data[name]["share"], int(data[name]["samples"]))
                for name in ("normals_facing_camera", "keypoints_in_mask", "pointmap_valid_in_mask")
            }
            known = CheckThresholds.__dataclass_fields__
            thresholds = CheckThresholds(
                **{k: v for k, v in dict(data.get("thresholds") or {}).items() if k in known}
            )
            return cls(
                mask_source=str(data["mask_source"]),
                grid_stride=int(data["grid_stride"]),
                normals_vs_pointmap=agreement,
                thresholds=thresholds,
                warnings=tuple(str(w) for w in data.get("warnings", ())),
                version=int(data.get("version", CHECKS_VERSION)),
                **shares,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CheckError(f"not a geometry check report ({exc!r})") from exc

    def lines(self) -> list[str]:
        """Human-readable report, one line per check, then the warnings (what `sapiens2 check` prints)."""

        def pct(value: float | None) -> str:
            return "n/a" if value is None else f"{value:.1%}"

        out = [f"person mask: {self.mask_source}, grid stride {self.grid_stride} px"]
        a = self.normals_vs_pointmap
        if a is not None:
            cos = "n/a" if a.mean_cosine is None else f"{a.mean_cosine:.3f}"
            best = "" if a.best_signs is None else f", best signs {a.best_signs} → {a.best_mean_cosine:.3f}"
            out.append(f"normals vs pointmap: mean cosine {cos} over {a.samples} samples{best}")
        for label, share in (
            ("normals facing the camera", self.normals_facing_camera),
            ("confident keypoints on the person", self.keypoints_in_mask),
            ("pointmap valid on the person", self.pointmap_valid_in_mask),
        ):
            if share is not None:
                out.append(f"{label}: {pct(share.share)} of {share.samples}")
        out += [f"WARNING: {w}" for w in self.warnings]
        return out


# --------------------------------------------------------------------------------------------------- helpers


def grid_stride(height: int, width: int, max_side: int = 256) -> int:
    """Sampling step that keeps the check grid at most `max_side` samples along the image's longer side."""
    if max_side < 3:
        raise CheckError(f"max_side must be at least 3, got {max_side}")
    return max(1, math.ceil(max(height, width) / max_side))


def _grid(value: Any, stride: int) -> np.ndarray:
    """The samples at rows/cols o, o + s, … (o = s // 2, the cell centre), sliced before the device copy."""
    o = stride // 2
    return to_numpy(value[o::stride, o::stride])


def _dense(value: Any, name: str) -> tuple[Any, Any]:
    """(array, own mask or None) from a NormalResult / PointmapResult or an (H, W, 3) array (torch or numpy)."""
    own_mask = None
    for attr in ("normals", "points"):
        if hasattr(value, attr):
            value, own_mask = getattr(value, attr), getattr(value, "mask", None)
            break
    if not hasattr(value, "shape"):
        value = np.asarray(value)
    shape = tuple(value.shape)
    if len(shape) != 3 or shape[2] != 3:
        raise CheckError(f"{name} must be (H, W, 3) channel-last for one image, got shape {shape}")
    return value, own_mask


def _foreground(seg: Any) -> Any:
    """Bool (H, W) from a SegResult (label > 0), int labels (> 0) or a bool / 0..1 mask (> 0.5)."""
    if hasattr(seg, "foreground"):
        return seg.foreground()
    arr = seg if hasattr(seg, "dtype") else np.asarray(seg)
    if len(arr.shape) != 2:
        raise CheckError(f"the person mask / segmentation must be (H, W), got shape {tuple(arr.shape)}")
    kind = str(arr.dtype)
    if "bool" in kind:
        return arr
    if "int" in kind:
        return arr > 0
    return arr > 0.5


def _unit(n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Normalised vectors and where they were usable (finite, length > 0.5: real normals, not background)."""
    n = n.astype(np.float64)
    finite = all_finite(n)
    n = np.where(finite[..., None], n, 0.0)
    length = np.linalg.norm(n, axis=-1)
    ok = finite & (length > 0.5)
    return n / np.maximum(length, 1e-12)[..., None], ok


# --------------------------------------------------------------------------------------------------- checks


def normals_from_pointmap(
    points: Any,
    *,
    stride: int = 1,
    max_slant_deg: float = 80.0,
    max_depth_jump: float = 0.1,
) -> tuple[np.ndarray, np.ndarray]:
    """Surface normals of a pointmap, on the grid `points[o::stride, o::stride]` (o = stride // 2).

    Central differences between the grid neighbours (one stride away): n = (P_down − P_up) × (P_right − P_left),
    which in the OpenCV frame (x right, y down, z forward) points out of the surface toward the camera (a
    fronto-parallel plane gives (0, 0, −1)). A sample is valid only when its four neighbours are valid points
    (finite, Z > 0) and each half-step is surface, not a depth discontinuity: steeper than `max_slant_deg`
    against the image plane, or a depth change larger than `max_depth_jump` × depth, is a silhouette edge in
    front of the background and would give a meaningless normal. The grid's border samples are invalid.

    Returns (h, w, 3) float64 unit normals (zero where invalid) and the (h, w) bool validity.
    """
    p = _grid(points, stride).astype(np.float64)
    if p.ndim != 3 or p.shape[2] != 3:
        raise CheckError(f"points must be (H, W, 3), got shape {p.shape}")
    h, w = p.shape[:2]
    normals = np.zeros((h, w, 3), dtype=np.float64)
    valid = np.zeros((h, w), dtype=bool)
    if h < 3 or w < 3:
        return normals, valid
    ok = all_finite(p) & (p[..., 2] > 0)
    p = np.where(ok[..., None], p, 0.0)
    c, left, right, up, down = p[1:-1, 1:-1], p[1:-1, :-2], p[1:-1, 2:], p[:-2, 1:-1], p[2:, 1:-1]
    inner = ok[1:-1, 1:-1] & ok[1:-1, :-2] & ok[1:-1, 2:] & ok[:-2, 1:-1] & ok[2:, 1:-1]
    tan_slant = math.tan(math.radians(max_slant_deg))
    for a, b in ((left, c), (c, right), (up, c), (c, down)):
        delta = b - a
        dz = np.abs(delta[..., 2])
        inner &= dz <= tan_slant * np.hypot(delta[..., 0], delta[..., 1])
        inner &= dz <= max_depth_jump * c[..., 2]
    n = np.cross(down - up, right - left)
    length = np.linalg.norm(n, axis=-1)
    inner &= length > 0
    normals[1:-1, 1:-1] = np.where(inner[..., None], n / np.maximum(length, 1e-300)[..., None], 0.0)
    valid[1:-1, 1:-1] = inner
    return normals, valid


def compare_normals_to_pointmap(
    normals: Any,
    points: Any,
    mask: Any | None = None,
    *,
    stride: int = 1,
    max_slant_deg: float = 80.0,
    max_depth_jump: float = 0.1,
) -> NormalAgreement:
    """Mean cosine between predicted `normals` and the pointmap's own normals (same frame), over `mask`.

    Also tries every sign pattern of the predicted normals' axes (cheap: the mean cosine of signs s is
    Σ sᵢ · mean(nᵢ · gᵢ)) and reports the best: on real weights, (1, 1, 1) confirms the assumed model frame,
    (1, −1, −1) says the other camera convention fits.
    """
    geo, valid = normals_from_pointmap(
        points, stride=stride, max_slant_deg=max_slant_deg, max_depth_jump=max_depth_jump
    )
    pred, pred_ok = _unit(_grid(normals, stride))
    if pred.shape != geo.shape:
        raise CheckError(f"normals {pred.shape} and pointmap {geo.shape} differ on the check grid")
    use = valid & pred_ok
    if mask is not None:
        use &= _grid(mask, stride).astype(bool)
    count = int(use.sum())
    if count == 0:
        return NormalAgreement(None, 0)
    per_axis = (pred[use] * geo[use]).mean(axis=0)
    scores = {s: float(np.dot(s, per_axis)) for s in SIGN_CANDIDATES}
    best = max(SIGN_CANDIDATES, key=lambda s: scores[s])
    return NormalAgreement(scores[(1, 1, 1)], count, best, scores[best])


def camera_facing_share(
    normals: Any, mask: Any | None = None, points: Any | None = None, *, stride: int = 1
) -> Share:
    """Share of the person's normals that face the camera: n · v > 0 with v = −P / |P| (toward the camera) where
    the pointmap is valid, else v = (0, 0, −1). The visible surface of a solid faces the camera everywhere, so
    real predictions give nearly 1 and a flipped z sign nearly 0."""
    n, ok = _unit(_grid(normals, stride))
    view = np.broadcast_to(np.array([0.0, 0.0, -1.0]), n.shape).copy()
    if points is not None:
        p = _grid(points, stride).astype(np.float64)
        if p.shape != n.shape:
            raise CheckError(f"normals {n.shape} and pointmap {p.shape} differ on the check grid")
        p_ok = all_finite(p) & (p[..., 2] > 0)
        p = np.where(p_ok[..., None], p, 0.0)
        view = np.where(p_ok[..., None], -p / np.maximum(np.linalg.norm(p, axis=-1), 1e-12)[..., None], view)
    if mask is not None:
        ok &= _grid(mask, stride).astype(bool)
    count = int(ok.sum())
    if count == 0:
        return Share(None, 0)
    return Share(float(((n * view).sum(-1) > 0)[ok].mean()), count)


def keypoints_in_mask_share(
    keypoints: Any, mask: Any, *, score_threshold: float = 0.3, radius: float = 0.0
) -> Share:
    """Share of confident keypoints (score ≥ `score_threshold`) within `radius` pixels of the mask.

    `keypoints`: (K, 3) or (P, K, 3) x, y, score in image pixels (corner origin: pixel (col, row) covers
    [col, col + 1)). A keypoint outside the image counts as outside the mask. The radius forgives joints on
    the silhouette (ears, finger tips) that land a pixel or two off a bilinearly resized mask."""
    kp = to_numpy(keypoints).astype(np.float64).reshape(-1, 3)
    m = to_numpy(mask).astype(bool)
    if m.ndim != 2:
        raise CheckError(f"the person mask must be (H, W), got shape {m.shape}")
    confident = np.isfinite(kp).all(axis=1) & (kp[:, 2] >= score_threshold)
    kp = kp[confident]
    if len(kp) == 0:
        return Share(None, 0)
    h, w = m.shape
    r = math.ceil(max(radius, 0.0))
    inside = 0
    for x, y, _ in kp:
        col, row = math.floor(x), math.floor(y)
        if not (0 <= col < w and 0 <= row < h):
            continue
        if m[max(row - r, 0) : row + r + 1, max(col - r, 0) : col + r + 1].any():
            inside += 1
    return Share(inside / len(kp), len(kp))


def pointmap_valid_share(points: Any, mask: Any, *, stride: int = 1) -> Share:
    """Share of the person's grid samples where the pointmap is valid (finite and in front of the camera)."""
    p = _grid(points, stride).astype(np.float64)
    m = _grid(mask, stride).astype(bool)
    if p.shape[:2] != m.shape:
        raise CheckError(f"pointmap {p.shape[:2]} and mask {m.shape} differ on the check grid")
    count = int(m.sum())
    if count == 0:
        return Share(None, 0)
    valid = all_finite(p) & (p[..., 2] > 0)
    return Share(float(valid[m].mean()), count)


# --------------------------------------------------------------------------------------------------- report


def _keypoint_array(pose: Any) -> np.ndarray:
    """(N, 3) keypoints of every person from a PoseResult, a list of PersonPose, or an array."""
    people: Iterable[Any] | None = getattr(pose, "people", None)
    if people is None and isinstance(pose, (list, tuple)):
        people = pose
    if people is not None:
        rows = [to_numpy(getattr(p, "keypoints", p)).reshape(-1, 3) for p in people]
        return np.concatenate(rows) if rows else np.zeros((0, 3))
    return to_numpy(pose).reshape(-1, 3)


def _size(value: Any) -> tuple[int, int]:
    shape = tuple(value.shape)
    return int(shape[0]), int(shape[1])


def can_check(
    *,
    normals: Any | None = None,
    pointmap: Any | None = None,
    pose: Any | None = None,
    mask: Any | None = None,
) -> bool:
    """Whether `check_geometry` has anything to run on these inputs: normals, or pose or a pointmap with a mask."""
    return normals is not None or (mask is not None and (pose is not None or pointmap is not None))


def check_geometry(
    *,
    normals: Any | None = None,
    pointmap: Any | None = None,
    pose: Any | None = None,
    seg: Any | None = None,
    mask: Any | None = None,
    thresholds: CheckThresholds | None = None,
    max_side: int = 256,
) -> GeometryReport:
    """Run every check the given results allow, for one image, and say which numbers are poor.

    normals: NormalResult or (H, W, 3) canonical-frame normals. pointmap: PointmapResult or (H, W, 3) points.
    pose: PoseResult, list of PersonPose, or (P, K, 3) keypoints. seg: SegResult, (H, W) labels or a mask.
    mask: an explicit (H, W) person mask (wins over seg). Checks run when both of their inputs exist:
    normals + pointmap → `normals_vs_pointmap`; normals → `normals_facing_camera` (with the pointmap's view
    rays when present); pose + a mask → `keypoints_in_mask`; pointmap + a mask → `pointmap_valid_in_mask`.
    """
    t = thresholds or CheckThresholds()
    n_arr, n_mask = _dense(normals, "normals") if normals is not None else (None, None)
    p_arr, p_mask = _dense(pointmap, "pointmap") if pointmap is not None else (None, None)
    person, source = None, "none"
    for candidate, name in ((mask, "mask"), (seg, "seg"), (n_mask, "normal"), (p_mask, "pointmap")):
        if candidate is not None:  # the predictors' own masks are the segmentation's foreground too
            person, source = _foreground(candidate), name
            break
    sizes = {
        name: _size(v)
        for name, v in (("normals", n_arr), ("pointmap", p_arr), ("mask", person))
        if v is not None
    }
    if len(set(sizes.values())) > 1:
        raise CheckError(
            "the results are of different image sizes ("
            + ", ".join(f"{k} {w}x{h}" for k, (h, w) in sizes.items())
            + "); check results of one image"
        )
    h, w = next(iter(sizes.values())) if sizes else (0, 0)
    stride = grid_stride(h, w, max_side) if sizes else 1
    warnings: list[str] = []

    agreement = None
    if n_arr is not None and p_arr is not None:
        agreement = compare_normals_to_pointmap(
            n_arr,
            p_arr,
            person,
            stride=stride,
            max_slant_deg=t.max_slant_deg,
            max_depth_jump=t.max_depth_jump,
        )
        cos = agreement.mean_cosine
        if cos is not None and agreement.samples >= t.min_samples:
            if cos < t.flipped_normal_cosine:
                warnings.append(WARN_NORMALS_FLIPPED.format(cosine=cos))
            elif cos < t.min_normal_cosine:
                warnings.append(WARN_NORMALS_DISAGREE.format(cosine=cos, minimum=t.min_normal_cosine))
            best = agreement.best_mean_cosine
            if (
                cos < t.min_normal_cosine
                and best is not None
                and agreement.best_signs != (1, 1, 1)
                and best - cos >= t.signs_margin
            ):
                warnings.append(
                    WARN_NORMALS_SIGNS.format(signs=agreement.best_signs, best=best, frame=MODEL_NORMAL_FRAME)
                )

    facing = None
    if n_arr is not None:
        facing = camera_facing_share(n_arr, person, p_arr, stride=stride)
        if (
            facing.share is not None
            and facing.samples >= t.min_samples
            and facing.share < t.min_camera_facing
        ):
            warnings.append(WARN_FACING_AWAY.format(share=facing.share, minimum=t.min_camera_facing))

    on_person = None
    if pose is not None and person is not None:
        on_person = keypoints_in_mask_share(
            _keypoint_array(pose),
            person,
            score_threshold=t.keypoint_score,
            radius=t.keypoint_radius * max(h, w),
        )
        if (
            on_person.share is not None
            and on_person.samples >= t.min_keypoints
            and on_person.share < t.min_keypoints_in_mask
        ):
            warnings.append(
                WARN_KEYPOINTS_OUTSIDE.format(share=on_person.share, minimum=t.min_keypoints_in_mask)
            )

    valid = None
    if p_arr is not None and person is not None:
        valid = pointmap_valid_share(p_arr, person, stride=stride)
        if valid.share is not None and valid.samples >= t.min_samples and valid.share < t.min_pointmap_valid:
            warnings.append(WARN_POINTMAP_INVALID.format(share=valid.share, minimum=t.min_pointmap_valid))

    return GeometryReport(
        mask_source=source,
        grid_stride=stride,
        normals_vs_pointmap=agreement,
        normals_facing_camera=facing,
        keypoints_in_mask=on_person,
        pointmap_valid_in_mask=valid,
        thresholds=t,
        warnings=tuple(warnings),
    )
