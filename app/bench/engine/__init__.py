"""The bench's engine: datasets, grids, measures, the run store and what every paper's
report shares."""
