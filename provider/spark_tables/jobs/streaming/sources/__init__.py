"""The sources a streaming query reads, one module each behind ``StreamSource`` (``source``); ``streams`` chooses."""
