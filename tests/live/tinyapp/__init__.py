"""A tiny Flower app for the local federation's tests: one QUERY per node and round, timed."""
