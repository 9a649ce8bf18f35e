"""Per-task pre-processing, batching and post-processing for Sapiens2 models (see docs/pipeline.md).

Typical use::

    from sapiens2_studio.core import load_model
    from sapiens2_studio.core.pipeline import predict_pose, predict_seg

    seg_model = load_model("sapiens2_1b_seg.safetensors", device="cuda")
    pose_model = load_model("sapiens2_1b_pose.safetensors", device="cuda")
    segs = predict_seg(seg_model, images)
    poses = predict_pose(pose_model, images, seg=segs)   # boxes from the segmentation
"""

from .boxes import NoPersonFoundError, boxes_from_labels, connected_components, normalize_box, whole_image_box
from .images import ImageInputError, ImageSource, PreparedImage, prepare_image
from .matting_predictor import predict_matting
from .pose_decode import average_flip, crop_to_image, decode_heatmaps, flip_back
from .postprocess import (
    MATTE_EPS,
    Intrinsics,
    albedo_to_image,
    matting_to_image,
    normals_to_image,
    pointmap_intrinsics,
    pointmap_to_image,
    seg_to_labels,
    uncrop,
    unit_normals,
    unpremultiply,
)
from .predict import (
    PREDICTORS,
    PredictionInterrupted,
    TaskMismatchError,
    predict,
    predict_albedo,
    predict_normal,
    predict_pointmap,
    predict_pose,
    predict_seg,
)
from .preprocess import (
    MEAN,
    NET_H,
    NET_W,
    STD,
    DenseLayout,
    PoseCrop,
    dense_layout,
    matting_interpolation,
    normalize,
    pose_crop,
    preprocess_dense,
    preprocess_matting,
    preprocess_pose_crop,
    preprocess_seg,
    udp_warp_matrix,
)
from .results import (
    AlbedoResult,
    MattingResult,
    NormalResult,
    PersonPose,
    PointmapResult,
    PoseResult,
    SegResult,
)
from .seg_groups import (
    SEG_GROUPS,
    UnknownSegClassError,
    class_id,
    group_class_ids,
    labels_to_mask,
    resolve_classes,
)
from .temporal import (
    KeypointSmoother,
    OneEuroFilter,
    rescale_pointmap,
    smooth_pointmap_sequence,
    smooth_pose_sequence,
    smooth_scales,
)

__all__ = [
    "MATTE_EPS",
    "MEAN",
    "NET_H",
    "NET_W",
    "PREDICTORS",
    "SEG_GROUPS",
    "STD",
    "AlbedoResult",
    "DenseLayout",
    "ImageInputError",
    "ImageSource",
    "Intrinsics",
    "KeypointSmoother",
    "MattingResult",
    "NoPersonFoundError",
    "NormalResult",
    "OneEuroFilter",
    "PersonPose",
    "PointmapResult",
    "PoseCrop",
    "PoseResult",
    "PredictionInterrupted",
    "PreparedImage",
    "SegResult",
    "TaskMismatchError",
    "UnknownSegClassError",
    "albedo_to_image",
    "average_flip",
    "boxes_from_labels",
    "class_id",
    "connected_components",
    "crop_to_image",
    "decode_heatmaps",
    "dense_layout",
    "flip_back",
    "group_class_ids",
    "labels_to_mask",
    "matting_interpolation",
    "matting_to_image",
    "normalize",
    "normalize_box",
    "normals_to_image",
    "pointmap_intrinsics",
    "pointmap_to_image",
    "pose_crop",
    "predict",
    "predict_albedo",
    "predict_matting",
    "predict_normal",
    "predict_pointmap",
    "predict_pose",
    "predict_seg",
    "prepare_image",
    "preprocess_dense",
    "preprocess_matting",
    "preprocess_pose_crop",
    "preprocess_seg",
    "rescale_pointmap",
    "resolve_classes",
    "seg_to_labels",
    "smooth_pointmap_sequence",
    "smooth_pose_sequence",
    "smooth_scales",
    "udp_warp_matrix",
    "uncrop",
    "unit_normals",
    "unpremultiply",
    "whole_image_box",
]
