"""An analysis as a report: one document (model), built by document from its sentences and
tables, that the Markdown, CSV, JSON and HTML writers render, and the figures.
Imports kit.core, kit.results and kit.run (a preset's published figures)."""
