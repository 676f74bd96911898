"""Rendering an analysis: the Markdown, CSV, JSON and HTML writers, the figures, and a
preset's published figures beside the measured ones. Imports kit.core and kit.results."""
