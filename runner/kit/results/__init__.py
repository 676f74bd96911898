"""What trials leave and what they say: the trial record, the results folder (store),
and the statistics and analysis of its records. Imports kit.core."""
