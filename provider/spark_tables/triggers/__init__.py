"""The provider's triggers: they wait in Airflow's triggerer and serialise themselves."""
