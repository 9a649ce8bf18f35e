"""`load_model`: checkpoint (path or mapping) → a ready Sapiens2 model on the target device and dtype.

The model is first built on the meta device from the inferred config, its expected key → shape map is compared
with the checkpoint (strict: every missing, unexpected or mis-shaped key is an error), then weights are streamed
tensor by tensor into storage allocated once on the target device in the target dtype.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import torch

from ..arch import Sapiens2Model
from ..arch.model import ModelSpec
from ..catalogue import ALL_TASKS, parse_official_name, task_file_hint
from ..dtypes import UnknownDtypeError
from ..dtypes import resolve_dtype as resolve_choice
from .errors import CheckpointError
from .identity import CheckpointIdentity, identify
from .infer import infer_config
from .reader import SafetensorsReader, pickle_refusal, sniff_format


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """The one dtype rule (`core/dtypes.resolve_dtype`); a bad name is this layer's CheckpointError."""
    try:
        return resolve_choice(dtype, device)[0]
    except UnknownDtypeError as error:
        raise CheckpointError(error.message) from None


def expected_shapes(model: Sapiens2Model, *, prefixed: bool) -> dict[str, tuple[int, ...]]:
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    if prefixed:
        return shapes
    return {k[len("backbone.") :]: v for k, v in shapes.items()}


def check_keys(
    expected: Mapping[str, tuple],
    found: Mapping[str, tuple],
    description: str,
    *,
    odd: tuple[str, tuple[int, ...], tuple[int, ...]] | None = None,
) -> None:
    """Strict comparison; the error lists the first few offenders of each kind and says what the file is.

    odd: (key, its shape, the shape the rest of the file implies) when one tensor the model was inferred from is
    mis-shaped (see `odd_tensor`): it is named alone, instead of the neighbours that only look wrong because the
    model followed it."""
    missing = [k for k in expected if k not in found]
    unexpected = [k for k in found if k not in expected]
    mismatched = [
        f"{k}: file {tuple(found[k])} vs model {tuple(expected[k])}"
        for k in expected
        if k in found and tuple(found[k]) != tuple(expected[k])
    ]
    if not (missing or unexpected or mismatched):
        return
    parts = [f"the checkpoint does not fit the model inferred from it ({description})"]
    if odd is not None:
        key, shape, implied = odd
        parts.append(
            f"tensor {key} has shape {shape}, but the rest of the file implies {implied}; the file is damaged or "
            "was edited, download it again"
        )
        mismatched = []
    for label, items in (
        ("missing keys", missing),
        ("unexpected keys", unexpected),
        ("shape mismatches", mismatched),
    ):
        if items:
            more = f", … (+{len(items) - 5} more)" if len(items) > 5 else ""
            parts.append(f"{label} ({len(items)}): {', '.join(items[:5])}{more}")
    raise CheckpointError("; ".join(parts))


_MAX_ODD_TRIALS = 64  # meta-model builds at most, on the error path only


def odd_tensor(
    found: Mapping[str, tuple[int, ...]],
    expected: Mapping[str, tuple[int, ...]],
    sources: set[str],
    *,
    rope_dtype: str = "bf16",
) -> tuple[str, tuple[int, ...], tuple[int, ...]] | None:
    """The one source tensor (a key the architecture was read from) whose shape the rest of the file disagrees with.

    Why: the model is inferred from a few tensors' shapes (`infer_config(reads=…)`); when one of those is
    mis-shaped, the inferred model follows it and the strict comparison blames its *neighbours*. For each source
    tensor holding a disputed value, this tries the value its neighbours agree on; if the model inferred then fits
    every other tensor of the file exactly, that tensor is the culprit. Returns (key, shape, implied shape) or None.
    """
    pairs = set()  # (value the model took, value the file's other tensors have)
    for key, shape in expected.items():
        if key in found and len(found[key]) == len(shape):
            pairs |= {(m, f) for f, m in zip(found[key], shape) if f != m}
    trials = 0
    for key in sorted(k for k in sources if k in found):
        shape = tuple(found[key])
        for model_value, file_value in sorted(pairs):
            for axis in (a for a, v in enumerate(shape) if v == model_value):
                trials += 1
                if trials > _MAX_ODD_TRIALS:
                    return None
                implied = (*shape[:axis], file_value, *shape[axis + 1 :])
                trial = {**found, key: implied}
                try:
                    cfg = infer_config(trial, rope_dtype=rope_dtype)
                    model = Sapiens2Model(cfg, device="meta")
                except (CheckpointError, ValueError):
                    continue
                shapes = expected_shapes(model, prefixed=cfg.task != "pretrain")
                if set(shapes) == set(found) and all(
                    tuple(shapes[k]) == tuple(found[k]) for k in shapes if k != key
                ):
                    return key, shape, implied
    return None


def _pickle_state_dict(path: Path) -> dict[str, torch.Tensor]:
    data = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    for wrapper in ("state_dict", "model", "module"):
        if isinstance(data, dict) and isinstance(data.get(wrapper), dict):
            data = data[wrapper]
    if not isinstance(data, dict) or not all(isinstance(v, torch.Tensor) for v in data.values()):
        raise CheckpointError(f"{path.name} does not hold a flat state dict of tensors")
    return data


def convert_to_safetensors(source: str | os.PathLike, destination: str | os.PathLike) -> Path:
    """Convert a pickled checkpoint (.pth/.bin/.pt) the user trusts into a .safetensors file, once.

    Why: the CLI and ComfyUI load safetensors only (a pickle can run code when loaded); this is their way to use an
    old file. The pickle is read with `torch.load(weights_only=True)`, wrappers (`state_dict`, `model`, `module`)
    are unwrapped, the result is checked to be a Sapiens2 checkpoint, and the file is written atomically."""
    from safetensors.torch import save_file

    src, dst = Path(source).expanduser(), Path(destination).expanduser()
    if not src.is_file():
        raise CheckpointError(f"checkpoint not found: {src}")
    if not sniff_format(src).startswith("pickle"):
        raise CheckpointError(f"{src.name} is not a PyTorch pickle; only .pth/.bin/.pt files need converting")
    if dst.suffix != ".safetensors":
        raise CheckpointError(f"the converted file must end in .safetensors, got {dst.name}")
    tensors = {k: v.contiguous() for k, v in _pickle_state_dict(src).items()}
    infer_config({k: tuple(v.shape) for k, v in tensors.items()})  # refuse what is not a Sapiens2 file
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    try:
        save_file(tensors, str(tmp))
        os.replace(tmp, dst)
    finally:
        tmp.unlink(missing_ok=True)
    return dst


def load_model(
    source: str | os.PathLike | Mapping[str, torch.Tensor],
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype | None = None,
    *,
    task: str | None = None,
    rope_dtype: str = "bf16",
    allow_pickle: bool = False,
) -> Sapiens2Model:
    """Build the Sapiens2 model a checkpoint describes and load it strictly.

    source: a `.safetensors` path (pretrain file with bare backbone keys, or task file with `backbone.*` +
        `decode_head.*`), or a mapping key → tensor (meta tensors allowed: the model is then built on `meta`).
    task: when given, a checkpoint of another task raises `CheckpointError` naming both.
    dtype: None/"auto" = `core/dtypes.auto_dtype` (fp32 on the CPU, bf16 where native, else fp16).
        `rope_embed.periods` always stays bfloat16.
    """
    device = torch.device(device)
    tensors: Mapping[str, torch.Tensor] | None = None
    if isinstance(source, Mapping):
        tensors = source
        name = "state dict"
    else:
        path = Path(source)
        name = path.name
        if not path.is_file():
            raise CheckpointError(f"checkpoint not found: {path}")
        if not sniff_format(path).startswith("pickle"):  # a safetensors file: its identity, then its weights
            return load_identity(identify(path, task=task, rope_dtype=rope_dtype), device, dtype)
        if not allow_pickle:
            raise pickle_refusal(path)
        tensors = _pickle_state_dict(path)
    shapes = {k: tuple(v.shape) for k, v in tensors.items()}
    model = checked_model(shapes, name, task=task, rope_dtype=rope_dtype, dtype=dtype, device=device)
    if any(t.device.type == "meta" for t in tensors.values()):
        device = torch.device("meta")
    if device.type != "meta":
        model.materialize_(device)
        _fill(model, None, tensors, model.cfg.task != "pretrain")
    return model.eval().requires_grad_(False)


def checked_model(
    shapes: Mapping[str, tuple[int, ...]],
    name: str,
    *,
    task: str | None = None,
    rope_dtype: str = "bf16",
    dtype: str | torch.dtype | None = None,
    device: torch.device | None = None,
) -> Sapiens2Model:
    """The model `shapes` describe, built on the meta device in the dtype `dtype` resolves to on `device`, and
    checked against every key and shape (strict). A file of another `task` is refused before its keys are
    compared."""
    sources: set[str] = set()
    cfg = infer_config(shapes, rope_dtype=rope_dtype, reads=sources)
    if task is not None and cfg.task != task:
        raise wrong_task(name, cfg.task, task)
    target_dtype = resolve_dtype(dtype, device if device is not None else torch.device("meta"))
    model = Sapiens2Model(cfg, device="meta", dtype=target_dtype)
    prefixed = cfg.task != "pretrain"
    layout = "task file: backbone.* + decode_head.*" if prefixed else "pretrain file: bare backbone keys"
    expected = expected_shapes(model, prefixed=prefixed)
    disputed = any(k in shapes and tuple(shapes[k]) != tuple(v) for k, v in expected.items())
    check_keys(
        expected,
        shapes,
        f"{name}, {layout}, {len(shapes)} keys, inferred {cfg.backbone.size_name} {cfg.task}",
        odd=odd_tensor(shapes, expected, sources, rope_dtype=rope_dtype) if disputed else None,
    )
    return model


def load_identity(
    identity: CheckpointIdentity, device: str | torch.device = "cpu", dtype: str | torch.dtype | None = None
) -> Sapiens2Model:
    """The model of a checked checkpoint (`identity.identify`), its weights streamed from the header parsed
    then: no second header read, no second key check. A file changed since is identified again."""
    if identity.header is None or identity.config is None:
        raise CheckpointError(f"{identity.name} has no parsed safetensors header to load weights from")
    if not identity.is_current():  # replaced on disk since: what it is now is what loads
        rope = identity.config.backbone.rope_dtype
        identity = identify(identity.path, task=identity.task, rope_dtype=rope, hash_home=identity.hash_home)
    device = torch.device(device)
    model = Sapiens2Model(identity.config, device="meta", dtype=resolve_dtype(dtype, device))
    if device.type != "meta":
        model.materialize_(device)
        _fill(model, identity.header, None, identity.config.task != "pretrain")
    return model.eval().requires_grad_(False)


def wrong_task(name: str, found: str, needed: str) -> CheckpointError:
    """A checkpoint of another task. When the file carries an official name of the needed task (a mislabelled or
    swapped file in the checkpoint folder), suggesting "a pose file such as <that very name>" would send the user
    back to the file just rejected, so the message says to replace it instead."""
    wanted = task_file_hint(needed) if needed in ALL_TASKS else needed
    official = parse_official_name(name)
    if official is None or official[0] != needed:
        return CheckpointError(
            f"{name} is a {found} checkpoint, but a {needed} model is needed here: choose {wanted}"
        )
    size = official[1]
    return CheckpointError(
        f"{name} holds a {found} model, not the {needed} model its name promises (the file was renamed or "
        f"overwritten); replace it with the official {needed} file",
        hints={
            "cli": f"download it again with: sapiens2 download --task {needed} --size {size} --force, or pass "
            f"--checkpoint {needed}=PATH to another {needed} file",
            "python": f"download it again with download_checkpoint({needed!r}, {size!r}, force=True), or pass "
            f"the path of another {needed} file",
            "comfyui": f"download it again (delete it and pick size {size} with downloads on), or pick another "
            f"*_{needed} checkpoint",
        },
    )


def size_contradiction(name: str, spec: ModelSpec, requested: str | None = None) -> str | None:
    """A warning when a file's architecture (read from its tensor shapes) is not the size its official name, or
    the size the user asked for, promises; else None. Why: a tiny test file or another size saved under an
    official name (`sapiens2_0.4b_pose.safetensors`) loads and runs, and its results would pass for the official
    model's. Front-ends show the text as it is (CLI note, progress-json `warning`, the bundle's models entry)."""
    official = parse_official_name(name)
    promised = [size for size in ((official[1] if official else None), requested) if size]
    if not promised or all(size == spec.size for size in promised):
        return None
    claim = f"its name promises {promised[0]}" if official else f"size {promised[0]} was asked for"
    if official and requested and requested != official[1]:
        claim += f" and size {requested} was asked for"
    found = "no released size" if spec.size == "custom" else f"Sapiens2 {spec.size}"
    return (
        f"{name} holds a {spec.task} model of {found} (embed_dim {spec.embed_dim}, depth {spec.depth}, "
        f"{spec.num_parameters:,} parameters), but {claim}; its results are not the official model's. Replace "
        f"it with the official file (sapiens2 download --task {spec.task} --size {promised[0]} --force) or "
        "give it a name of its own"
    )


def refuse_size_contradiction(path: str | os.PathLike | CheckpointIdentity, size: str) -> None:
    """Refuse an official file fetched for an explicitly asked `size` whose architecture (read from the header
    alone, before any image is read; an identity's, when given one) is another size. Why: the user asked for that
    size's results; a warning is enough only when the size was not asked for (`size_contradiction`)."""
    file = path.path if isinstance(path, CheckpointIdentity) else Path(path)
    if file.suffix.lower() != ".safetensors" or not file.is_file():
        return
    spec = path.spec if isinstance(path, CheckpointIdentity) else identify(file).spec
    if spec is None:
        return
    message = size_contradiction(file.name, spec, requested=size)
    if message is not None:
        raise CheckpointError(
            message.replace("; its results are not the official model's", ", so it is refused"),
            hints={
                "cli": f"replace it (sapiens2 download --task {spec.task} --size {size} --force), or leave out "
                f"--size to run it anyway with a warning, or pass --checkpoint {spec.task}=PATH",
                "python": f"replace it, or leave size=None to run it anyway with a warning, or give it as the "
                f"{spec.task} checkpoint",
            },
        )


def _fill(model: Sapiens2Model, reader: SafetensorsReader | None, tensors, prefixed: bool) -> None:
    targets = model.state_dict(keep_vars=True)
    with torch.no_grad():
        if reader is not None:
            with open(reader.path, "rb") as handle:
                for key, param in targets.items():
                    file_key = key if prefixed else key[len("backbone.") :]
                    reader.read_into(file_key, param.data, handle)
        else:
            for key, param in targets.items():
                file_key = key if prefixed else key[len("backbone.") :]
                param.data.copy_(tensors[file_key])
