"""Runs inside spark-submit: the bundled driver and one module per job kind. Never imports Airflow."""
