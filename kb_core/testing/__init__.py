"""Offline helpers shared by the tests and the benchmark (model factories). Not used at run time."""
