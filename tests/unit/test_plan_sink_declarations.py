"""Property tests of what an executed plan may write: a PostgreSQL sink of the plan file only as the task declares it
(name, connection, table and key), whatever the file says."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_tables.core.errors import SpecError
from spark_tables.core.streaming.sinks import PostgresUpsertSink
from spark_tables.hooks.plan import check_declared

DECLARED = PostgresUpsertSink(name="counts", conn_id="serving", table="public.counts", key=("cid",))
_NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)
SINKS = st.builds(
    PostgresUpsertSink,
    name=st.sampled_from(["counts", "other"]) | _NAMES,
    conn_id=st.sampled_from(["serving", "prod_writer"]) | _NAMES,
    table=st.sampled_from(["public.counts", "counts", "public.users"]),
    key=st.sampled_from([("cid",), ("cid", "day"), ("id",)]),
)


@given(SINKS)
def test_a_sink_is_written_only_as_declared(sink: PostgresUpsertSink) -> None:
    try:
        check_declared(sink, [DECLARED], "/plans/p.json")
    except SpecError as err:
        assert sink != DECLARED
        assert "\n" not in str(err) and str(err).startswith(f"plan /plans/p.json writes PostgreSQL sink {sink.name!r}")
    else:
        assert sink == DECLARED


@given(st.lists(SINKS, max_size=4), SINKS)
def test_any_declarations_admit_exactly_the_sinks_among_them(declared: list[PostgresUpsertSink], sink) -> None:
    if sink in declared:
        check_declared(sink, declared, "p")
    else:
        with pytest.raises(SpecError):
            check_declared(sink, declared, "p")
