"""What trials leave and what they say: the trial record and a campaign's settings with
their JSON Schemas, the results folder (store), and the statistics and analysis of its
records. Imports kit.core."""
