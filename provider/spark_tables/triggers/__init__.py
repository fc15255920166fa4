"""Triggers of this provider: serialise themselves and run in Airflow's triggerer."""
