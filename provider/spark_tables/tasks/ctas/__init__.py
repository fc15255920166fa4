"""The Airflow side of CTAS: the claims that let a later task clean up after a try that died."""
