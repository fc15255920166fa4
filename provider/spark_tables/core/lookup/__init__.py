"""Lookup joins (FLIP-221): the options, the table declaration, the job kinds and full-cache snapshots."""
