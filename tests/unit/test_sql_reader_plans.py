"""The SQL reader's plan statements, read from their text as Flink spells them."""

from __future__ import annotations

import pytest

from spark_tables.core.errors import SpecError
from spark_tables.core.plan.statements import PlanStatement
from spark_tables.tasks.sql_reader import join_statement_sets, read_plan_statement, read_statement


def parse_plan_statement(text: str) -> PlanStatement:
    return read_plan_statement(text)


def test_the_four_statements() -> None:
    assert parse_plan_statement("COMPILE PLAN 's3://b/p.json' FOR INSERT INTO t SELECT * FROM s;") == PlanStatement(
        action="compile", uri="s3://b/p.json", inserts=("INSERT INTO t SELECT * FROM s",)
    )
    statement = parse_plan_statement("-- nightly\ncompile plan if not exists '/p.json' for insert into t select 1")
    assert (statement.action, statement.if_not_exists, statement.compiles, statement.executes) == (
        "compile", True, True, False,
    )  # fmt: skip
    both = parse_plan_statement("COMPILE AND EXECUTE PLAN 'file:///p.json' FOR INSERT INTO t SELECT 1")
    assert (both.action, both.compiles, both.executes) == ("compile_and_execute", True, True)
    assert parse_plan_statement("EXECUTE PLAN IF EXISTS '/it''s.json'") == PlanStatement(
        action="execute", uri="/it's.json", if_exists=True
    )
    assert parse_plan_statement("EXPLAIN PLAN '/p.json'").action == "explain"
    assert read_statement("  EXPLAIN PLAN '/p.json'").plan == PlanStatement(action="explain", uri="/p.json")
    assert read_statement("EXPLAIN SELECT 1").plan is None


def test_a_statement_set_holds_several_inserts() -> None:
    statement = parse_plan_statement(
        "COMPILE PLAN '/p.json' FOR STATEMENT SET BEGIN INSERT INTO a SELECT ';' FROM s; INSERT INTO b SELECT 2 "
        "FROM s; END"
    )
    assert list(statement.inserts) == ["INSERT INTO a SELECT ';' FROM s", "INSERT INTO b SELECT 2 FROM s"]


def test_a_statement_set_split_on_semicolons_is_put_back_together() -> None:
    pieces = [
        "CREATE TABLE x (a INT) USING json",
        "COMPILE PLAN '/p.json' FOR STATEMENT SET BEGIN INSERT INTO a SELECT 1 FROM s",
        "INSERT INTO b SELECT 2 FROM s",
        "END",
        "EXECUTE PLAN '/p.json'",
    ]
    joined = join_statement_sets(pieces)
    assert len(joined) == 3
    assert list(parse_plan_statement(joined[1]).inserts) == [
        "INSERT INTO a SELECT 1 FROM s",
        "INSERT INTO b SELECT 2 FROM s",
    ]
    with pytest.raises(SpecError, match="its STATEMENT SET has no END"):
        join_statement_sets(pieces[:3])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("COMPILE PLAN '/p.json' FOR SELECT * FROM s", "is not an INSERT: a compiled plan writes its results"),
        ("COMPILE PLAN '/p.json'", "say what to compile"),
        ("COMPILE PLAN '' FOR INSERT INTO t SELECT 1", "the plan's URI is empty"),
        ("EXECUTE PLAN /p.json", "is not a plan statement"),
        ("COMPILE PLAN '/p.json' FOR STATEMENT SET BEGIN END", "the STATEMENT SET is empty"),
    ],
)
def test_bad_statements_fail_with_one_line(text: str, message: str) -> None:
    with pytest.raises(SpecError) as raised:
        parse_plan_statement(text)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("insert", "message"),
    [
        (
            "INSERT INTO t SELECT /*+ STATE_TTL('o' = '-1 h') */ o.shop, count(*) FROM orders o GROUP BY o.shop",
            "COMPILE PLAN, INSERT INTO t SELECT /*+ STATE_TTL('o' = '-1 h') */ o.shop,…: STATE_TTL('o')='-1 h' is "
            "negative: write a duration of zero or more",
        ),
        (  # a hint of an inner query block, beside another hint
            "INSERT INTO t SELECT a FROM (SELECT /*+ BROADCAST(x), STATE_TTL('x' = '2 fortnights') */ a, count(*) "
            "FROM x GROUP BY a)",
            "COMPILE PLAN, INSERT INTO t SELECT a FROM (SELECT /*+ BROADCAST(x), STATE…: STATE_TTL('x')="
            "'2 fortnights' has an unknown unit 'fortnights': use days",
        ),
        (
            "INSERT INTO t SELECT /*+ STATE_TTL(o) */ o.shop FROM orders o",
            "COMPILE PLAN, INSERT INTO t SELECT /*+ STATE_TTL(o) */ o.shop FROM orders…: STATE_TTL takes 'table' = "
            "'ttl' pairs, not o",
        ),
    ],
)
def test_a_compiles_state_ttl_hints_are_checked_on_the_airflow_side_as_the_compiler_words_them(
    insert: str, message: str
) -> None:
    """Before any job starts: the durations of every hint of every query block, and the hint's form."""
    with pytest.raises(SpecError) as failed:
        read_plan_statement(f"COMPILE PLAN '/p.json' FOR {insert}")
    assert str(failed.value).startswith(message)
    assert "\n" not in str(failed.value)


def test_good_state_ttl_hints_and_unreadable_sql_are_left_to_the_compiler() -> None:
    good = "INSERT INTO t SELECT /*+ STATE_TTL('o' = '1 h', 'c' = 'P7D') */ o.a FROM o JOIN c ON o.k = c.k"
    assert read_plan_statement(f"COMPILE PLAN '/p.json' FOR {good}").inserts == (good,)
    unreadable = "INSERT INTO t SELECT /*+ STATE_TTL('o' = '-1 h') */ FROM WHERE ((("
    assert read_plan_statement(f"COMPILE PLAN '/p.json' FOR {unreadable}").inserts == (unreadable,)
