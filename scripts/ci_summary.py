"""The summary of a matrix run (scripts/ci_matrix.py): each host version it ran, and the tests passed on each.

Counts come from the JUnit XML of each pytest leg; ComfyUI tests are grouped by their host parameter (backend,
or backend + frontend for the browser tests), Blender legs by the bpy checks that ran inside Blender (their own
XML files).  Skipped host tests are listed with their reasons: in CI a missing host fails instead.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path

PARAM = re.compile(r"\[comfyui-([0-9.]+)(?:-frontend-(pinned|[0-9.]+))?")


def _cases(xml: Path) -> list[tuple[str, str, str]]:
    """(test name, outcome, message) per test case of a JUnit file."""
    if not xml.is_file():
        return []
    out = []
    for case in ET.parse(xml).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome, message = "failed", child.get("message", "")
            elif child.tag == "skipped":
                kind = child.get("type", "")
                outcome = "xfailed" if "xfail" in kind else "skipped"
                message = child.get("message", "")
        out.append((f"{case.get('classname', '')}::{case.get('name', '')}", outcome, message))
    return out


def _counts(cases: list[tuple[str, str, str]]) -> str:
    counts = Counter(outcome for _, outcome, _ in cases)
    order = ("passed", "failed", "xfailed", "skipped")
    return ", ".join(f"{counts[k]} {k}" for k in order if counts[k]) or "no tests"


def _comfy_rows(step, names: dict) -> list[tuple[str, list]]:
    groups: dict[tuple[str, str], list] = defaultdict(list)
    for case in _cases(step.xml):
        found = PARAM.search(case[0])
        groups[(found.group(1), found.group(2) or "") if found else ("", "")].append(case)
    rows = []
    for backend, frontend in sorted(groups, key=lambda k: (k[0], k[1] != "", k[1] != "pinned", k[1])):
        cases = groups[(backend, frontend)]
        if not backend:
            rows.append((f"{step.label}: workflow files, no server needed", cases))
        elif not frontend:
            rows.append((f"ComfyUI {backend} server, in-process, controlnet_aux {names['aux']}", cases))
        elif frontend == "pinned":
            pinned = names["pinned"].get(backend, "?")
            rows.append((f"ComfyUI {backend} + frontend {pinned} (pinned), browser", cases))
        else:
            kind = "newest on the registry" if frontend == names["newest"] else "registry"
            rows.append((f"ComfyUI {backend} + frontend {frontend} ({kind}), browser", cases))
    return rows


def _blender_rows(step) -> list[tuple[str, list]]:
    folder = Path(step.env.get("SAPIENS2_BLENDER_JUNIT_DIR", ""))
    inner = [c for xml in sorted(folder.glob("*.xml")) for c in _cases(xml)] if folder.is_dir() else []
    outer = _cases(step.xml)
    if not inner:  # the bpy checks did not run (skipped, or the leg failed before): show the outer cases
        return [(f"{step.label} add-on checks", outer)]
    return [(f"{step.label} add-on checks in bpy ({len(outer)} modules)", inner)]


def print_summary(
    steps, seconds: float, newest_frontend: str, aux_version: str, pinned: dict[str, str]
) -> bool:
    """Print the per-host table and failures; True when everything that ran passed. ``pinned``: ComfyUI
    version -> the frontend version it pins."""
    names = {"newest": newest_frontend, "aux": aux_version, "pinned": pinned}
    ok = True
    rows: list[tuple[str, str]] = []
    skipped_hosts: list[str] = []
    for step in steps:
        failed = step.rc not in (None, 0) and not (step.junit and step.rc == 5)
        ok &= not failed
        if step.skip:
            skipped_hosts.append(f"{step.label or step.name}: {step.skip}")
            continue
        if not step.junit:
            continue
        if step.name.startswith("comfyui-"):
            groups = _comfy_rows(step, names)
        elif step.name.startswith("blender-"):
            groups = _blender_rows(step)
        else:
            groups = [(step.label, _cases(step.xml))]
        for label, cases in groups:
            rows.append((label, _counts(cases)))
            for name, outcome, message in cases:
                if outcome == "skipped" and step.name != "unit":
                    skipped_hosts.append(f"{name}: {message}")
        if failed and not groups:
            rows.append((step.label, f"FAILED (rc {step.rc}), see {step.log.name}"))
    width = max((len(label) for label, _ in rows), default=10)
    print("\n" + "=" * 100)
    print("Test matrix summary")
    print("=" * 100)
    for label, counts in rows:
        print(f"  {label:<{width}}  {counts}")
    print("-" * 100)
    for step in steps:
        if step.rc is not None:
            state = "ok" if step.rc == 0 or (step.junit and step.rc == 5) else f"FAILED rc={step.rc}"
            print(f"  {step.name:<24} {step.seconds:7.0f} s  {state}")
    if skipped_hosts:
        print("-" * 100 + "\nSkipped:")
        for line in skipped_hosts:
            print(f"  {line}")
    failed_steps = [s for s in steps if s.rc not in (None, 0) and not (s.junit and s.rc == 5)]
    for step in failed_steps:
        tail = step.log.read_text(encoding="utf-8", errors="replace")[-3000:] if step.log.is_file() else ""
        print("-" * 100 + f"\n{step.name} FAILED (rc {step.rc}); last lines of {step.log}:\n{tail}")
    minutes, secs = divmod(int(seconds), 60)
    print("=" * 100)
    print(f"{'PASSED' if ok else 'FAILED'}: whole matrix in {minutes} min {secs:02d} s")
    return ok
