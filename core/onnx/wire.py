"""Read an ONNX file's top level without loading it: metadata, and an integrity seal over the graph.

An ONNX file is one protobuf `ModelProto`. Its top-level fields can be walked by their length prefixes (a few
reads and seeks, no weights loaded), which tells a truncated file at once (a field runs past the end) and gives
the `metadata_props` (field 14). Our export appends one more metadata entry after saving, the sha256 of the graph
field's bytes (and of the external-data file), so any changed byte of the weights or graph is refused before a
session is built or an image is read. Appending a repeated field to a serialized message is valid protobuf:
every ONNX reader sees it as one more metadata_props entry.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from .errors import OnnxFileError

GRAPH_FIELD = 7
METADATA_FIELD = 14
SEAL_KEY = "sapiens2.graph_sha256"
DATA_SEAL_KEY = "sapiens2.data_sha256"
_CHUNK = 8 << 20


@dataclass
class TopLevel:
    """Where the graph lies in the file, and the metadata entries in file order."""

    size: int
    graph: tuple[int, int] | None = None  # (offset, length) of the graph field's payload
    props: dict[str, str] = field(default_factory=dict)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("varint runs past the data")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return value, pos
        shift += 7


def _read_varint(handle) -> int | None:
    value = shift = 0
    while True:
        byte = handle.read(1)
        if not byte:
            if shift == 0:
                return None  # clean end of the message
            raise ValueError("the file ends inside a field tag")
        value |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return value
        shift += 7
        if shift > 63:
            raise ValueError("a field tag is longer than protobuf allows")


def _entry(payload: bytes) -> tuple[str, str]:
    """A StringStringEntryProto: key (1) and value (2)."""
    out = {1: "", 2: ""}
    pos = 0
    while pos < len(payload):
        tag, pos = _varint(payload, pos)
        if tag & 7 != 2:
            raise ValueError("a metadata entry holds a non-string field")
        length, pos = _varint(payload, pos)
        if pos + length > len(payload):
            raise ValueError("a metadata entry runs past its end")
        out[tag >> 3] = payload[pos : pos + length].decode("utf-8")
        pos += length
    return out[1], out[2]


def scan(path: Path) -> TopLevel:
    """The file's top level, or OnnxFileError for a file that is not a whole ONNX model."""
    size = path.stat().st_size
    top = TopLevel(size=size)
    try:
        with open(path, "rb") as handle:
            while True:
                tag = _read_varint(handle)
                if tag is None:
                    break
                number, kind = tag >> 3, tag & 7
                if number == 0:
                    raise ValueError("field number 0")
                if kind == 0:
                    if _read_varint(handle) is None:
                        raise ValueError("the file ends inside a number")
                elif kind in (1, 5):
                    step = 8 if kind == 1 else 4
                    if handle.seek(step, 1) > size:
                        raise ValueError("the file ends inside a number")
                elif kind == 2:
                    length = _read_varint(handle)
                    if length is None:
                        raise ValueError("the file ends inside a length")
                    start = handle.tell()
                    if start + length > size:
                        raise ValueError(
                            f"field {number} needs {start + length - size} bytes more than the file has"
                        )
                    if number == METADATA_FIELD:
                        key, value = _entry(handle.read(length))
                        top.props[key] = value
                    else:
                        if number == GRAPH_FIELD:
                            top.graph = (start, length)
                        handle.seek(length, 1)
                else:
                    raise ValueError(f"wire type {kind} of field {number} is not used by ONNX")
    except (ValueError, UnicodeDecodeError) as exc:
        raise OnnxFileError(
            f"{path.name} is not a complete ONNX file (truncated or damaged: {exc})"
        ) from None
    if top.graph is None:
        raise OnnxFileError(f"{path.name} is not an ONNX model (it holds no graph)")
    return top


def _sha256(path: Path, offset: int = 0, length: int | None = None) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        handle.seek(offset)
        left = path.stat().st_size - offset if length is None else length
        while left > 0:
            block = handle.read(min(_CHUNK, left))
            if not block:
                break
            digest.update(block)
            left -= len(block)
    return digest.hexdigest()


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _encode_entry(key: str, value: str) -> bytes:
    body = b""
    for number, text in ((1, key), (2, value)):
        raw = text.encode("utf-8")
        body += _encode_varint(number << 3 | 2) + _encode_varint(len(raw)) + raw
    return _encode_varint(METADATA_FIELD << 3 | 2) + _encode_varint(len(body)) + body


def data_file(path: Path) -> Path:
    """The external-data file the exporter writes beside large models."""
    return path.with_name(path.name + ".data")


def seal(path: Path) -> None:
    """Append the graph's (and external data's) sha256 as metadata entries."""
    top = scan(path)
    offset, length = top.graph  # type: ignore[misc]
    entries = _encode_entry(SEAL_KEY, _sha256(path, offset, length))
    if data_file(path).is_file():
        entries += _encode_entry(DATA_SEAL_KEY, _sha256(data_file(path)))
    with open(path, "ab") as handle:
        handle.write(entries)


def verify(path: Path) -> dict[str, str]:
    """The metadata of a whole, unchanged file; OnnxFileError names what is wrong otherwise."""
    top = scan(path)
    expected = top.props.get(SEAL_KEY)
    if expected is not None:
        offset, length = top.graph  # type: ignore[misc]
        if _sha256(path, offset, length) != expected:
            raise OnnxFileError(
                f"{path.name} is damaged: its graph and weights differ from what was exported (sha256 mismatch); "
                "export it again"
            )
    data_expected = top.props.get(DATA_SEAL_KEY)
    if data_expected is not None:
        data = data_file(path)
        if not data.is_file():
            raise OnnxFileError(f"{path.name} keeps its weights in {data.name}, which is missing beside it")
        if _sha256(data) != data_expected:
            raise OnnxFileError(
                f"{data.name} (the weights of {path.name}) is damaged (sha256 mismatch); export again"
            )
    return top.props
