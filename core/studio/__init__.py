"""The application engine every front-end (CLI, ComfyUI, Python, Ray workers) runs on; see docs/architecture.md."""
