"""A separate Spark application that reads tables back: ``spark-submit read_back.py '<sql>'``, with the catalog's
settings that hold a secret (its metastore's password) in ``READ_BACK_SECRET_CONF`` (JSON), set on the session as the
provider's driver sets them."""

import json
import os
import sys

from pyspark.sql import SparkSession

builder = SparkSession.builder
for key, value in json.loads(os.environ.get("READ_BACK_SECRET_CONF", "{}")).items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
rows = [
    [value if isinstance(value, int | float | str | None) else str(value) for value in row]
    for row in spark.sql(sys.argv[1]).collect()
]
print("ROWS " + json.dumps(rows), flush=True)
spark.stop()
