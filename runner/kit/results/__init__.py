"""What trials leave: the trial record and a campaign's settings with their JSON Schemas,
the results folder (store) and its run lock (runlock), the SQLite catalogue of campaigns
(catalogue, selection) and the MLPerf export (mllog). Imports kit.core and kit.launch."""
