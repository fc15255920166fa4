"""The one use of PySpark's non-public API: the Arrow type in which ``mapInArrow`` batches carry a Spark type.

The lookup join builds its value columns as Arrow arrays of exactly the types Spark expects back from
``mapInArrow``; PySpark's own conversion (``pyspark.sql.pandas.types.to_arrow_type``) is the only one that is
sure to agree with it, and it is not public. ``tests/unit/test_arrow_types.py`` fails when it changes, and
``tests/unit/test_private_names.py`` when a private PySpark name is used anywhere else, or not listed here.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import DataType

#: The private PySpark names this module uses, and the only ones the provider uses.
PRIVATE_NAMES = ("pyspark.sql.pandas.types.to_arrow_type",)


def arrow_type(data_type: DataType, time_zone: str) -> pa.DataType:
    """The Arrow type of ``data_type`` in ``mapInArrow`` batches; TIMESTAMP carries the session's ``time_zone``."""
    return to_arrow_type(data_type, timezone=time_zone)
