"""Driving the Sapiens2 engine (the `sapiens2` CLI the user installs once, in its own Python) from Blender.

The add-on never imports ``sapiens2_studio``, torch or numpy-heavy model code: it starts ``sapiens2 predict …
--progress json`` as a child process and reads its JSON event stream (docs/cli.md, "Progress stream").
``locate.py`` finds the engine, ``events.py`` turns events into progress, ``runner.py`` runs the process (non-
blocking polls for the modal operator, a blocking loop for background mode) — all three without ``bpy``, so the
same code runs in any Python; ``preferences.py`` is the add-on's preferences (``bpy``).
"""
