"""The Airflow side of lookup tables: their connections and full-cache snapshot pointers."""
