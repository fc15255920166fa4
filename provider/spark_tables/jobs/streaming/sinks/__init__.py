"""The sinks a streaming query writes, one module each behind ``SinkWriter`` (``writer``); ``writers`` chooses."""
