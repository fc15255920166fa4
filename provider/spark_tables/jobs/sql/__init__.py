"""The ``sql`` job: statements run in order in one application."""
