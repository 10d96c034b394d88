"""Experiments of the lessons: one module per design, read from the notebooks."""
