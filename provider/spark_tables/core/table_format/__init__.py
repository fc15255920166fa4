"""Table formats with a transaction log of their own (Delta Lake), as a Spark session loads them."""
