"""Operators: thin and templated; each builds a job spec and runs it with ``SparkJobHook``."""
