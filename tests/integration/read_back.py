"""A separate Spark application that reads tables back: ``spark-submit read_back.py '<sql>'``."""

import json
import sys

from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()
rows = [
    [value if isinstance(value, int | float | str | None) else str(value) for value in row]
    for row in spark.sql(sys.argv[1]).collect()
]
print("ROWS " + json.dumps(rows), flush=True)
spark.stop()
