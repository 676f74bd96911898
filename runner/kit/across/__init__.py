"""Questions across campaigns, on the catalogue or results folders: how overheads changed
(compare), a regression gate (gate, kit check), one runtime's overhead campaign by
campaign (history). Imports kit.analysis and kit.results."""
