"""Bundle parsing and geometry maths: numpy only, no ``bpy``, so it is testable and reusable outside Blender."""
