"""Build a ComfyUI graph once and write it in both formats: the UI (litegraph) file and its API-format twin.

The node and socket facts (input order, which inputs are widgets, output names and types) come from a live
server's ``/object_info``, so the files match what the frontend and the executor expect.  Also used by the tests
to type-check the UI files' links against ``/object_info``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

WIDGET_TYPES = {"INT", "FLOAT", "STRING", "BOOLEAN", "COMBO"}
# Frontend-only (virtual) nodes: shown in the UI file, absent from /object_info and from the API prompt.
UI_ONLY_NODES = {"Note", "MarkdownNote"}
GROUP_COLORS = ("#3f789e", "#8a8", "#b58b2a", "#a1309b", "#88a")
PACK_ID = "sapiens2-studio"
PACK_VERSION = "0.1.0"


def input_spec(info: dict, name: str) -> tuple[Any, dict]:
    for group in ("required", "optional"):
        spec = info["input"].get(group, {}).get(name)
        if spec is not None:
            return spec[0], (spec[1] if len(spec) > 1 else {})
    raise KeyError(f"{info['name']} has no input {name!r}")


def is_widget(type_: Any, options: dict) -> bool:
    """Inputs the frontend shows as widgets (sockets otherwise)."""
    if options.get("forceInput"):
        return False
    return isinstance(type_, list) or type_ in WIDGET_TYPES


def input_order(info: dict) -> list[str]:
    order = info.get("input_order") or {}
    return [*order.get("required", []), *order.get("optional", [])]


def socket_type(type_: Any) -> str:
    return "COMBO" if isinstance(type_, list) else str(type_)


@dataclass
class Node:
    id: int
    class_type: str
    inputs: dict[str, Any]
    title: str | None = None
    column: int = 0
    links_out: dict[int, list[int]] = field(default_factory=dict)
    text: str | None = None  # a Note's text
    models: list[dict[str, str]] | None = None  # properties.models: files the frontend checks and offers

    def out(self, index: int) -> tuple[Node, int]:
        return (self, index)


class Graph:
    def __init__(self, object_info: dict) -> None:
        self.info = object_info
        self.nodes: list[Node] = []
        self.groups: list[tuple[str, int]] = []  # (title, column): one framed group per column

    def node(
        self,
        class_type: str,
        *,
        title: str | None = None,
        column: int | None = None,
        models: list[dict[str, str]] | None = None,
        **inputs: Any,
    ) -> Node:
        """Add a node; ``models`` ({name, url, directory} per file) becomes its ``properties.models``, which the
        frontend reads to warn about missing model files and offer their download."""
        if class_type not in self.info:
            raise KeyError(f"node type {class_type} is not known to the server")
        info = self.info[class_type]
        for name in inputs:
            input_spec(info, name)  # raises for a typo
        earliest = 1 + max((v[0].column for v in inputs.values() if isinstance(v, tuple)), default=-1)
        if column is not None and column < earliest - 1:  # same column as a source: placed below it
            raise ValueError(
                f"{class_type} cannot sit left of the nodes it reads from (column {earliest - 1})"
            )
        node = Node(len(self.nodes) + 1, class_type, inputs, title, earliest if column is None else column)
        node.models = models
        self.nodes.append(node)
        return node

    def note(self, text: str, *, title: str = "How to use", column: int = 0) -> Node:
        """A UI-only Note (how to use the workflow); it never reaches the API prompt."""
        node = Node(len(self.nodes) + 1, "Note", {}, title, column, text=text)
        self.nodes.append(node)
        return node

    def group(self, title: str, column: int) -> None:
        """Frame every node of ``column`` in a titled group (columns never overlap, so neither do groups)."""
        self.groups.append((title, column))

    # ----------------------------------------------------------------------------------------------- API format
    def to_api(self) -> dict[str, Any]:
        prompt = {}
        for n in self.nodes:
            if n.class_type in UI_ONLY_NODES:
                continue
            info = self.info[n.class_type]
            inputs = {}
            for name in input_order(info):
                if name not in n.inputs:
                    type_, options = input_spec(info, name)
                    if is_widget(type_, options) and "default" in options:
                        inputs[name] = options["default"]
                    elif is_widget(type_, options) and isinstance(type_, list) and type_:
                        inputs[name] = type_[0]
                    continue
                value = n.inputs[name]
                inputs[name] = [str(value[0].id), value[1]] if isinstance(value, tuple) else value
            prompt[str(n.id)] = {
                "class_type": n.class_type,
                "inputs": inputs,
                "_meta": {"title": n.title or info.get("display_name") or n.class_type},
            }
        return prompt

    # ------------------------------------------------------------------------------------------------ UI format
    def to_ui(self) -> dict[str, Any]:
        api = self.to_api()
        links: list[list[Any]] = []
        ui_nodes = []
        rows: dict[int, float] = {}
        order = sorted(self.nodes, key=lambda n: (n.column, n.id))
        pending = []
        for k, n in enumerate(order):
            if n.class_type in UI_ONLY_NODES:
                x, y = 40 + n.column * 380, rows.get(n.column, 40.0)
                height = _note_height(n.text or "")
                rows[n.column] = y + height + 50
                ui_nodes.append(_note_node(n, k, x, y, height))
                continue
            info = self.info[n.class_type]
            ui_inputs, widgets = [], []
            for name in input_order(info):
                type_, options = input_spec(info, name)
                value = n.inputs.get(name)
                linked = isinstance(value, tuple)
                if is_widget(type_, options):
                    widgets.append(
                        api[str(n.id)]["inputs"].get(name) if not linked else _default(type_, options)
                    )
                    if options.get("image_upload") or options.get("video_upload"):
                        widgets.append("image")  # the upload button's value, as the frontend saves it
                    if linked:
                        ui_inputs.append(
                            {"name": name, "type": socket_type(type_), "widget": {"name": name}, "link": None}
                        )
                else:
                    entry = {"name": name, "type": socket_type(type_), "link": None}
                    if name in info["input"].get("optional", {}):
                        entry["shape"] = 7  # litegraph's hollow socket for optional inputs
                    ui_inputs.append(entry)
                if linked:
                    pending.append((n, name, value, len(ui_inputs) - 1, ui_inputs))
            x = 40 + n.column * 380
            y = rows.get(n.column, 40.0)
            height = 40 + 24 * (len(widgets) + max(len(ui_inputs), len(info["output"])))
            previews = ("LoadImage", "LoadVideo", "SaveImage", "PreviewImage")
            if n.class_type in previews or info.get("output_node"):
                height += 240  # room for the image / text preview the frontend draws inside the node
            if n.class_type == "LoadVideo":
                height += 200  # a video player is taller (its controls)
            rows[n.column] = y + height + 50
            ui_nodes.append(
                {
                    "id": n.id,
                    "type": n.class_type,
                    "pos": [x, y],
                    "size": [340, height],
                    "flags": {},
                    "order": k,
                    "mode": 0,
                    "inputs": ui_inputs,
                    "outputs": [
                        {"name": name, "type": socket_type(t), "links": [], "slot_index": i}
                        for i, (name, t) in enumerate(zip(info["output_name"], info["output"]))
                    ],
                    "properties": {
                        "Node name for S&R": n.class_type,
                        "cnr_id": PACK_ID if n.class_type.startswith("Sapiens2") else "comfy-core",
                        "ver": PACK_VERSION if n.class_type.startswith("Sapiens2") else "0.3.64",
                        **({"models": n.models} if n.models else {}),
                    },
                    "widgets_values": widgets,
                    **({"title": n.title} if n.title else {}),
                }
            )
        by_id = {u["id"]: u for u in ui_nodes}
        for n, _name, (src, slot), to_slot, ui_inputs in pending:
            link_id = len(links) + 1
            type_ = socket_type(self.info[src.class_type]["output"][slot])
            links.append([link_id, src.id, slot, n.id, to_slot, type_])
            ui_inputs[to_slot]["link"] = link_id
            by_id[src.id]["outputs"][slot]["links"].append(link_id)
        for u in ui_nodes:
            for o in u["outputs"]:
                if not o["links"]:
                    o["links"] = None
        return {
            "last_node_id": max(n.id for n in self.nodes),
            "last_link_id": len(links),
            "nodes": ui_nodes,
            "links": links,
            "groups": self._ui_groups(ui_nodes),
            "config": {},
            "extra": {"ds": {"scale": 0.8, "offset": [0, 0]}},
            "version": 0.4,
        }

    def _ui_groups(self, ui_nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        column_of = {n.id: n.column for n in self.nodes}
        groups = []
        for i, (title, column) in enumerate(self.groups):
            members = [u for u in ui_nodes if column_of[u["id"]] == column]
            if not members:
                raise ValueError(f"group {title!r}: column {column} holds no nodes")
            top = min(u["pos"][1] for u in members) - 30 - 40  # node title bar, then the group's header
            bottom = max(u["pos"][1] + u["size"][1] for u in members) + 20
            left = 40 + column * 380 - 15
            groups.append(
                {
                    "id": i + 1,
                    "title": title,
                    "bounding": [left, top, 370, bottom - top],
                    "color": GROUP_COLORS[i % len(GROUP_COLORS)],
                    "font_size": 24,
                    "flags": {},
                }
            )
        return groups


def _note_height(text: str, chars_per_line: int = 44, line_height: float = 15.0) -> float:
    """Height that shows the whole text in a 340-px-wide Note (the frontend wraps long lines)."""
    lines = sum(max(1, -(-len(line) // chars_per_line)) for line in text.split("\n"))
    return 40 + line_height * lines


def _note_node(n: Node, order: int, x: float, y: float, height: float) -> dict[str, Any]:
    return {
        "id": n.id,
        "type": n.class_type,
        "pos": [x, y],
        "size": [340, height],
        "flags": {},
        "order": order,
        "mode": 0,
        "inputs": [],
        "outputs": [],
        "properties": {},
        "widgets_values": [n.text or ""],
        "color": "#432",
        "bgcolor": "#653",
        **({"title": n.title} if n.title else {}),
    }


def _default(type_: Any, options: dict) -> Any:
    if "default" in options:
        return options["default"]
    return type_[0] if isinstance(type_, list) and type_ else None


def check_ui_links(workflow: dict, object_info: dict) -> list[str]:
    """Problems with a UI workflow: unknown node types, and links whose type differs from either socket."""
    problems = []
    nodes = {n["id"]: n for n in workflow["nodes"]}
    for n in workflow["nodes"]:
        if n["type"] not in object_info and n["type"] not in UI_ONLY_NODES:
            problems.append(f"node #{n['id']}: type {n['type']} is not registered")
    for link_id, src, src_slot, dst, dst_slot, type_ in workflow["links"]:
        a, b = nodes.get(src), nodes.get(dst)
        if a is None or b is None:
            problems.append(f"link {link_id}: refers to a missing node")
            continue
        if a["type"] not in object_info or b["type"] not in object_info:
            continue
        out_type = socket_type(object_info[a["type"]]["output"][src_slot])
        dst_input = b["inputs"][dst_slot]
        in_type, _options = input_spec(object_info[b["type"]], dst_input["name"])
        in_type = socket_type(in_type)
        if not _types_match(out_type, in_type) or not _types_match(type_, in_type):
            problems.append(
                f"link {link_id}: {a['type']}[{src_slot}] ({out_type}) -> {b['type']}.{dst_input['name']} "
                f"({in_type}), link says {type_}"
            )
        if dst_input.get("link") != link_id:
            problems.append(
                f"link {link_id}: input {b['type']}.{dst_input['name']} does not point back to it"
            )
    return problems


def _types_match(a: str, b: str) -> bool:
    """ComfyUI's rule: equal, either is '*', or the comma-separated sets overlap."""
    if a == b or "*" in (a, b):
        return True
    return bool(set(a.split(",")) & set(b.split(",")))
