"""Operators, panels and the drag-and-drop file handler."""
