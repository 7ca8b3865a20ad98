"""A tiny Flower app for the launcher's tests: one QUERY per node and round, replies timed."""
