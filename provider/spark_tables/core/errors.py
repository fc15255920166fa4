"""Errors raised while validating what a DAG author asked for, before anything runs."""


class SpecError(ValueError):
    """Bad input: the message is one line naming what is wrong and what to do."""


class JobError(RuntimeError):
    """A job failed in a way it can name itself: the message is one line."""


def one_line(error: BaseException) -> str:
    """The first line of an error's message, prefixed by its type unless the message names its own class."""
    if isinstance(error, SpecError | JobError):
        return str(error)
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].startswith("An error occurred while calling"):  # py4j: the cause comes next
        lines = [lines[1].removeprefix(": ")]
    first = lines[0] if lines else ""
    if first.startswith("["):  # Spark's error classes: "[TABLE_OR_VIEW_NOT_FOUND] The table ..."
        return first
    return f"{type(error).__name__}: {first}" if first else type(error).__name__
