"""A Spark application that opens a catalog, prints ``HOLDING`` and keeps it open until a FIFO is closed.

``spark-submit hold_catalog.py <fifo>``: the driver's stdin is not the submitter's, hence the FIFO.
"""

import sys

from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()
spark.sql("SHOW DATABASES").collect()
print("HOLDING", flush=True)
with open(sys.argv[1]) as release:
    release.read()
spark.stop()
