"""An analysis as a report: one document (model), built by document from its sentences and
tables, that the Markdown, CSV, JSON and HTML writers render, the figures, and a preset's
published figures beside the measured ones (published). Imports kit.core and kit.results."""
