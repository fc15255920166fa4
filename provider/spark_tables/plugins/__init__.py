"""Airflow plugins of this provider: listeners and UI pages, registered through ``airflow.plugins``."""
