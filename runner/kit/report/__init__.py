"""Rendering an analysis: the Markdown, CSV, JSON and HTML writers and the figures.
Imports kit.core, kit.results and kit.run (a preset's published figures)."""
