"""Scene building: one module per kind of Blender object, all fed by the parsed bundle."""
