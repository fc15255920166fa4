"""CTAS (FLIP-218): the statement, the job kinds and the ownership marks of the tables a task creates."""
