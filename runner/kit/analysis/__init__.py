"""One campaign's records to its findings: the intervals (stats), a trial's figure by
round (values), the launches left out (screen), paired ratios (pairing), where the spread
comes from (variance), scaling and sweeps, what precision costs, the differences between
arms' launches (fingerprints), and summary, which ties them into the Analysis every
report format renders (findings). Imports kit.results."""
