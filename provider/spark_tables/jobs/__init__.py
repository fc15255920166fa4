"""Runs inside spark-submit: the bundled driver (``entry``) and a sub-package per capability with its job's code.

Never imports Airflow: the Airflow side ships this package, with ``core``, as a zip on ``--py-files``.
"""
