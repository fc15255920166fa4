"""``COMPILE PLAN``: Spark SQL INSERT statements into a plan of nodes, with each stateful node's state TTL.

sqlglot's Spark dialect reads the statement's structure (which tables, joins, groupings, the deduplication
pattern, hints); Spark's analyzer names and types every node's output as the node is added (``Pipeline``), so an
unknown table or column fails the compile with Spark's own message. What compiles:

- tables read as streams (``orders`` or ``STREAM(orders)``): file-source tables (JSON, CSV, parquet), rate sources;
- projections and filters (``Calc``);
- deduplication: ``SELECT ... FROM (SELECT ..., ROW_NUMBER() OVER (PARTITION BY k ORDER BY proctime [DESC]) AS rn
  FROM ...) WHERE rn = 1``, keeping the first row (ASC) or the last (DESC) in processing-time order;
- group aggregation: ``COUNT(*)``, ``COUNT([DISTINCT] x)``, ``SUM``, ``MIN``, ``MAX``, ``AVG`` with ``GROUP BY`` and
  ``HAVING``;
- regular inner and left joins of two streams on equalities between the sides, each on the implementation
  ``core.plan.implementations`` chooses (Spark's stream-stream join for an inner join of insert-only inputs);
- ``/*+ STATE_TTL('name' = '1d', ...) */`` on a query block: a join input's or an aggregated table's TTL, as in
  Flink 1.19.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import sqlglot
from pyspark.sql import SparkSession
from sqlglot import exp

from spark_tables.core.errors import SpecError
from spark_tables.core.identifiers import TableIdentifier, quote_part
from spark_tables.core.plan.aggregates import AggregateCall
from spark_tables.core.plan.document import CompiledPlan
from spark_tables.core.plan.hints import hint_pairs, state_ttls
from spark_tables.core.plan.implementations import deduplicate_implementation, join_implementation
from spark_tables.core.plan.nodes import Calc, Deduplicate, GroupAggregate, Join, Node, Sink, SourceScan
from spark_tables.core.plan.state import StateEntry, default_entries, default_ttl
from spark_tables.core.plan.statements import shown
from spark_tables.core.streaming.sinks import KafkaUpsertSink, PlanSink, PostgresUpsertSink, TableSink, TableUpsertSink
from spark_tables.core.streaming.sources import KafkaTopicSource
from spark_tables.jobs.plan.pipeline import Pipeline
from spark_tables.jobs.streaming.clock import BatchClock

DIALECT = "spark"

_AGGREGATES: dict[type[exp.Expression], str] = {
    exp.Count: "count",
    exp.Sum: "sum",
    exp.Min: "min",
    exp.Max: "max",
    exp.Avg: "avg",
}
_ROW_NUMBER_ONE = {exp.EQ: 1, exp.LTE: 1, exp.LT: 2}


@dataclass
class Relation:
    """A node's output as the SQL around it sees it: its columns, and the names that reach them.

    ``names`` maps ``(qualifier, column)`` (lower case; qualifier None for an unqualified reference) to the SQL that
    reads it: the column's quoted name, or a constant (``rn`` after a deduplication is always 1).
    """

    node_id: int
    columns: list[str]
    names: dict[tuple[str | None, str], list[str]] = field(default_factory=dict)
    #: The table name or alias this relation has in its query block, where it is one table or subquery.
    alias: str | None = None

    @classmethod
    def of(cls, node_id: int, columns: Sequence[str], qualifier: str | None) -> Relation:
        relation = cls(node_id, list(columns), alias=qualifier)
        for column in columns:
            relation.bind(qualifier, column, quote_part(column))
        return relation

    def bind(self, qualifier: str | None, column: str, sql: str) -> None:
        for key in {(None, column.lower()), *([(qualifier.lower(), column.lower())] if qualifier else [])}:
            self.names.setdefault(key, [])
            if sql not in self.names[key]:
                self.names[key].append(sql)

    def resolve(self, column: exp.Column) -> str:
        qualifier = column.table.lower() if column.table else None
        found = self.names.get((qualifier, column.name.lower()), [])
        shown = f"{column.table}.{column.name}" if column.table else column.name
        if not found:
            raise SpecError(f"column {shown} is not in the input: it has {', '.join(self.columns)}")
        if len(found) > 1:
            raise SpecError(f"column {shown} is ambiguous: qualify it with its table's name or alias")
        return found[0]

    def star(self, qualifier: str | None) -> list[str]:
        if qualifier is None:
            return [quote_part(column) for column in self.columns]
        return [
            sql
            for column in self.columns
            for sql in self.names.get((qualifier.lower(), column.lower()), [])
            if sql == quote_part(column)
        ]


class PlanCompiler:
    """Compiles INSERT statements into one plan; Spark analyses each node as it is added."""

    def __init__(
        self,
        spark: SparkSession,
        configuration: dict[str, str],
        postgres_sinks: Sequence[PostgresUpsertSink] = (),
        table_upsert_sinks: Sequence[TableUpsertSink] = (),
        declared_sources: Sequence[KafkaTopicSource] = (),
        kafka_connections: Mapping[str, Mapping[str, str]] | None = None,
        kafka_sinks: Sequence[KafkaUpsertSink] = (),
    ) -> None:
        self.spark = spark
        self.kafka_sinks = {sink.name.lower(): sink for sink in kafka_sinks}
        self.declared_sources = {source.name.lower(): source for source in declared_sources}
        self.configuration = dict(configuration)
        self.job_ttl = default_ttl(self.configuration)
        self.postgres_sinks = {sink.name.lower(): sink for sink in postgres_sinks}
        self.table_upsert_sinks = {sink.name.lower(): sink for sink in table_upsert_sinks}
        self.pipeline = Pipeline(spark, self.job_ttl, BatchClock(), kafka_connections)
        self.nodes: list[Node] = []
        self.sources: list[str] = []
        self.sinks: list[PlanSink] = []

    def compile(self, inserts: Sequence[str]) -> CompiledPlan:
        """The plan of a ``COMPILE PLAN``'s INSERT statements, read and split on the Airflow side."""
        statements = list(inserts)
        for statement in statements:
            try:
                self._insert(statement)
            except SpecError as err:
                raise SpecError(f"COMPILE PLAN, {shown(statement)}: {err}") from None
        return CompiledPlan(
            nodes=tuple(self.nodes),
            sources=tuple(self.sources),
            sinks=tuple(self.sinks),
            configuration=self.configuration,
            statements=tuple(statements),
        )

    # -- statements -----------------------------------------------------------------------------------------------

    def _insert(self, statement: str) -> None:
        try:
            tree = sqlglot.parse_one(statement, read=DIALECT)
        except sqlglot.errors.ParseError as err:
            raise SpecError(f"cannot be read as Spark SQL ({str(err).splitlines()[0]})") from None
        if not isinstance(tree, exp.Insert) or tree.args.get("overwrite"):
            raise SpecError("compile INSERT INTO <table> SELECT ...: a streaming plan appends or upserts its results")
        target = tree.this
        if isinstance(target, exp.Schema):
            raise SpecError("INSERT INTO <table> (<columns>) is not supported: select the columns in the table's order")
        relation = self._query(tree.expression)
        sink = self._sink(target)
        relation = self._shape_for_sink(relation, sink)
        self._add(Sink(id=0, inputs=(relation.node_id,), sink=sink.name), f"Sink(table=[{sink.name}])")

    def _sink(self, target: exp.Expression) -> PlanSink:
        if not isinstance(target, exp.Table):
            raise SpecError("INSERT INTO must name a table")
        name = ".".join(part.name for part in target.parts)
        sink: PlanSink = (
            self.postgres_sinks.get(name.lower())
            or self.kafka_sinks.get(name.lower())
            or self.table_upsert_sinks.get(str(TableIdentifier.parse(name)).lower())
            or TableSink(name)
        )
        if sink.name not in [known.name for known in self.sinks]:
            self.sinks.append(sink)
        return sink

    def _shape_for_sink(self, relation: Relation, sink: PlanSink) -> Relation:
        """A catalog table takes insert-only rows, cast to its columns by position; a PostgreSQL or Kafka sink
        takes the query's columns by name, its key among them."""
        if isinstance(sink, PostgresUpsertSink | KafkaUpsertSink):
            missing = [key for key in sink.key if key.lower() not in [c.lower() for c in relation.columns]]
            if missing:
                raise SpecError(
                    f"sink {sink.name}: the query has no column(s) {missing} of its key {list(sink.key)}: "
                    "select them (with AS to name them)"
                )
            return relation
        self.pipeline.check_sink(sink, relation.node_id)
        try:
            table = self.spark.table(sink.name).schema
        except Exception:
            raise SpecError(f"table {sink.name} does not exist: create it before compiling") from None
        if len(table.fields) != len(relation.columns):
            raise SpecError(
                f"the query gives {len(relation.columns)} column(s), table {sink.name} has {len(table.fields)}: "
                "select one column per table column, in order"
            )
        projection = tuple(
            f"CAST({quote_part(column)} AS {target.dataType.simpleString()}) AS {quote_part(target.name)}"
            for column, target in zip(relation.columns, table.fields, strict=True)
        )
        return self._calc(relation, projection, None)

    # -- query blocks ---------------------------------------------------------------------------------------------

    def _query(self, query: exp.Expression) -> Relation:
        if isinstance(query, exp.Subquery):
            return self._query(query.this)
        if not isinstance(query, exp.Select):
            raise SpecError(
                f"{type(query).__name__.upper()} is not supported: compile SELECT ... FROM ... [JOIN ...] [WHERE ...] "
                "[GROUP BY ... [HAVING ...]]"
            )
        for clause in ("order", "limit", "offset", "qualify", "distinct", "windows", "laterals", "pivots"):
            if query.args.get(clause):
                raise SpecError(f"{clause.upper()} in a streaming plan is not supported: leave it out")
        ttls = _state_ttl_hint(query)
        dedup = self._deduplication(query)
        if dedup is not None:
            relation, condition = dedup
            used: list[str] = []
        else:
            where = query.args.get("where")
            conjuncts = _conjuncts(where.this) if where else []
            relation, used = self._from(query, ttls, conjuncts)
            condition = _and(conjuncts) if conjuncts else None
        aggregates = [node for projection in query.expressions for node in _aggregate_calls(projection)]
        if query.args.get("group") or aggregates:
            if relation.alias and relation.alias.lower() in ttls:
                used.append(relation.alias.lower())
            _unused_hints(ttls, used)
            return self._aggregate(query, relation, condition, ttls.get((relation.alias or "").lower()))
        if query.args.get("having"):
            raise SpecError("HAVING needs GROUP BY or an aggregate")
        _unused_hints(ttls, used)
        projection = self._projection(query.expressions, relation)
        return self._calc(relation, projection, condition)

    def _from(
        self, query: exp.Select, ttls: dict[str, timedelta], where: list[exp.Expression] | None = None
    ) -> tuple[Relation, list[str]]:
        """The FROM clause and its joins; the hint names the joins used. The WHERE conjuncts (``where``) on one
        side of a join go below it where that gives the same rows, as Flink's planner pushes them (so that a join
        keeps no state for rows the query drops anyway); they are removed from ``where``."""
        from_ = query.args.get("from_") or query.args.get("from")
        if from_ is None:
            raise SpecError("the query reads no table: add FROM")
        relation = self._factor(from_.this)
        used: list[str] = []
        for join in query.args.get("joins") or []:
            right = self._factor(join.this)
            left_filter, right_filter = _pushed_down(where if where is not None else [], relation, right, join)
            relation = self._join(
                self._filter(relation, left_filter), self._filter(right, right_filter), join, ttls, used
            )
        return relation, used

    def _factor(self, factor: exp.Expression) -> Relation:
        if isinstance(factor, exp.Subquery):
            inner = self._query(factor.this)
            return self._requalified(inner, factor.alias or None)
        if not isinstance(factor, exp.Table):
            raise SpecError(f"{factor.sql(DIALECT)} cannot be read as a stream: name a table, or STREAM(table)")
        if isinstance(factor.this, exp.Anonymous) and factor.this.name.upper() == "STREAM":
            (inner,) = factor.this.expressions
            name = ".".join(part.name for part in inner.parts) if isinstance(inner, exp.Column) else inner.name
        else:
            name = ".".join(part.name for part in factor.parts)
        declared = self.declared_sources.get(name.lower())
        table = declared.name if declared else str(TableIdentifier.parse(name))
        if table not in self.sources:
            self.sources.append(table)
        node = self._add(SourceScan(id=0, inputs=(), table=table, source=declared), None)
        columns = [column.name for column in node.output_schema]
        if declared:
            read = f"KafkaTopicSource(topic=[{declared.topic}], format=[{declared.value_format}], "
            read += f"on_malformed=[{declared.on_malformed}], fields=[{', '.join(columns)}])"
        else:
            read = f"TableSourceScan(table=[{table}], fields=[{', '.join(columns)}])"
        self.nodes[-1] = dataclasses.replace(node, description=read)
        alias = factor.alias or (declared.name if declared else TableIdentifier.parse(table).table)
        return Relation.of(node.id, columns, alias)

    def _requalified(self, relation: Relation, alias: str | None) -> Relation:
        return Relation.of(relation.node_id, relation.columns, alias)

    # -- joins ----------------------------------------------------------------------------------------------------

    def _join(
        self, left: Relation, right: Relation, join: exp.Join, ttls: dict[str, timedelta], used: list[str]
    ) -> Relation:
        side, kind = join.text("side").upper(), join.text("kind").upper()
        if side in ("RIGHT", "FULL"):
            raise SpecError(f"{side} JOIN is not supported: write a LEFT JOIN with the two sides swapped")
        if kind in ("SEMI", "ANTI", "CROSS") or join.args.get("using") or not join.args.get("on"):
            raise SpecError(
                "a join of two streams needs ON with an equality between the two sides (no CROSS, SEMI, ANTI or "
                "USING joins)"
            )
        join_type = "LEFT" if side == "LEFT" else "INNER"
        right = self._renamed_apart(right, left)
        left_keys, right_keys, left_only, right_only, both = [], [], [], [], []
        for conjunct in _conjuncts(join.args["on"]):
            sides = self._sides(conjunct, left, right)
            if isinstance(conjunct, exp.EQ) and sides == {"left", "right"}:
                a, b = conjunct.this, conjunct.expression
                if isinstance(a, exp.Column) and isinstance(b, exp.Column):
                    if self._sides(a, left, right) == {"right"}:
                        a, b = b, a
                    left_keys.append(_unquoted(left.resolve(a)))
                    right_keys.append(_unquoted(right.resolve(b)))
                    continue
            {frozenset({"left"}): left_only, frozenset({"right"}): right_only}.get(frozenset(sides), both).append(
                conjunct
            )
        if not left_keys:
            raise SpecError(
                "the join has no equality between a column of each side: a regular stream join needs one (ON a.k = b.k)"
            )
        if join_type == "LEFT" and (left_only or both):
            raise SpecError(
                "a LEFT JOIN's ON may hold, besides equalities of the two sides, only conditions on the right side: "
                "move the others into WHERE, or into a subquery of the left side"
            )
        right = self._filter(right, right_only)
        left = self._filter(left, left_only)
        left_ttl, right_ttl = (ttls.get((rel.alias or "").lower()) for rel in (left, right))
        used.extend(rel.alias.lower() for rel in (left, right) if rel.alias and rel.alias.lower() in ttls)
        state = _state(Join.STATE_NAMES, self.job_ttl, left_ttl, right_ttl)
        description = (
            f"Join(joinType=[{'InnerJoin' if join_type == 'INNER' else 'LeftOuterJoin'}], "
            f"where=[{' AND '.join(f'{lk} = {rk}' for lk, rk in zip(left_keys, right_keys, strict=True))}], "
            f"leftInput=[{left.alias or 'join'}], rightInput=[{right.alias or 'join'}])"
        )
        implementation = join_implementation(
            join_type, [self.pipeline.insert_only[rel.node_id] for rel in (left, right)], state[0].ttl_ms
        )
        node = self._add(
            Join(
                id=0,
                inputs=(left.node_id, right.node_id),
                join_type=join_type,
                left_key=tuple(left_keys),
                right_key=tuple(right_keys),
                state=state,
                implementation=implementation,
            ),
            description,
        )
        joined = Relation(node.id, [*left.columns, *right.columns])
        for part in (left, right):
            for key, sqls in part.names.items():
                for sql in sqls:
                    joined.names.setdefault(key, [])
                    if sql not in joined.names[key]:
                        joined.names[key].append(sql)
        return self._filter(joined, both)

    def _renamed_apart(self, right: Relation, left: Relation) -> Relation:
        """``right`` with the columns whose names ``left`` has too renamed (``id`` becomes ``id0``), as Flink's
        join output does, so the joined rows have one column per name."""
        taken = {column.lower() for column in left.columns}
        renames: dict[str, str] = {}
        for column in right.columns:
            if column.lower() in taken:
                suffix = 0
                while f"{column}{suffix}".lower() in taken or f"{column}{suffix}" in right.columns:
                    suffix += 1
                renames[column] = f"{column}{suffix}"
                taken.add(renames[column].lower())
        if not renames:
            return right
        projection = tuple(
            f"{quote_part(column)} AS {quote_part(renames[column])}" if column in renames else quote_part(column)
            for column in right.columns
        )
        node = self._add(
            Calc(id=0, inputs=(right.node_id,), projection=projection), _calc_description(projection, None)
        )
        renamed = Relation(node.id, [renames.get(column, column) for column in right.columns])
        renamed.alias = right.alias
        for (qualifier, column), sqls in right.names.items():
            renamed.names[(qualifier, column)] = [
                next((quote_part(renames[c]) for c in renames if quote_part(c) == sql), sql) for sql in sqls
            ]
        return renamed

    def _sides(self, expression: exp.Expression, left: Relation, right: Relation) -> set[str]:
        sides = set()
        for column in expression.find_all(exp.Column):
            in_left = _reaches(left, column)
            in_right = _reaches(right, column)
            if in_left and in_right:
                raise SpecError(f"column {column.sql(DIALECT)} is ambiguous: qualify it with its table's alias")
            if not in_left and not in_right:
                left.resolve(column)  # raises, naming the columns there are
            sides.add("left" if in_left else "right")
        return sides

    # -- deduplication --------------------------------------------------------------------------------------------

    def _deduplication(self, query: exp.Select) -> tuple[Relation, exp.Expression | None] | None:
        """The deduplication, if ``query`` reads one: ``SELECT ... FROM (SELECT ..., ROW_NUMBER() OVER
        (PARTITION BY k ORDER BY proctime [DESC]) AS rn FROM t) WHERE rn = 1 [AND ...]``; with the rest of the
        WHERE clause, which applies to the deduplicated rows."""
        from_ = query.args.get("from_") or query.args.get("from")
        where = query.args.get("where")
        if from_ is None or not isinstance(from_.this, exp.Subquery) or query.args.get("joins") or where is None:
            return None
        inner = from_.this.this
        if not isinstance(inner, exp.Select):
            return None
        numbered = [
            p for p in inner.expressions if isinstance(p, exp.Alias) and isinstance(p.this, exp.Window)
            and isinstance(p.this.this, exp.RowNumber)
        ]  # fmt: skip
        if len(numbered) != 1:
            return None
        row_number = numbered[0]
        conjuncts = _conjuncts(where.this)
        first_only = [c for c in conjuncts if _is_first_row(c, row_number.alias)]
        if not first_only:
            raise SpecError(
                f"ROW_NUMBER() is supported for deduplication only: filter the outer query on {row_number.alias} = 1"
            )
        window = row_number.this
        order = window.args.get("order")
        if order is None or len(order.expressions) != 1 or not _is_proctime(order.expressions[0].this):
            raise SpecError(
                "a deduplication orders by processing time: ORDER BY proctime (ASC keeps the first row of each key, "
                "DESC the last)"
            )
        keep = "last" if order.expressions[0].args.get("desc") else "first"
        source, _ = self._from(inner, {})
        inner_where = inner.args.get("where")
        projection = self._projection([p for p in inner.expressions if p is not row_number], source)
        before = self._calc(source, projection, inner_where.this if inner_where else None)
        partition = window.args.get("partition_by") or []
        if not partition or not all(isinstance(p, exp.Column) for p in partition):
            raise SpecError("a deduplication partitions by columns: PARTITION BY one or more columns of its input")
        key = tuple(_unquoted(source.resolve(p)) for p in partition)
        missing = [k for k in key if k not in before.columns]
        if missing:
            raise SpecError(f"the deduplication key {missing} must be among the subquery's selected columns")
        description = f"Deduplicate(keep=[{keep.capitalize()}Row], key=[{', '.join(key)}], order=[PROCTIME])"
        state = _state(Deduplicate.STATE_NAMES, self.job_ttl)
        implementation = deduplicate_implementation(keep, self.pipeline.insert_only[before.node_id], state[0].ttl_ms)
        node = self._add(
            Deduplicate(id=0, inputs=(before.node_id,), key=key, keep=keep, state=state, implementation=implementation),
            description,
        )
        deduplicated = Relation.of(node.id, before.columns, from_.this.alias or None)
        deduplicated.bind(from_.this.alias or None, row_number.alias, "CAST(1 AS INT)")
        rest = [c for c in conjuncts if c not in first_only]
        return deduplicated, _and(rest) if rest else None

    # -- aggregation ----------------------------------------------------------------------------------------------

    def _aggregate(
        self, query: exp.Select, source: Relation, condition: exp.Expression | None, hint_ttl: timedelta | None
    ) -> Relation:
        group = query.args.get("group")
        groupings = list(group.expressions) if group else []
        pre: list[str] = []
        key: list[str] = []
        grouped: dict[str, str] = {}  # a grouping expression's SQL -> its key column
        for index, grouping in enumerate(groupings):
            if isinstance(grouping, exp.Column):
                name = _unquoted(source.resolve(grouping))
                pre.append(quote_part(name))
            else:
                name = f"__group{index}"
                pre.append(f"{self._rewritten(grouping, source)} AS {quote_part(name)}")
            key.append(name)
            grouped[grouping.sql(DIALECT).lower()] = name
        calls: dict[str, AggregateCall] = {}
        arguments: dict[str, str] = {}
        having = query.args.get("having")
        for expression in [*query.expressions, *([having.this] if having else [])]:
            for call in _aggregate_calls(expression):
                text = call.sql(DIALECT).lower()
                if text not in calls:
                    calls[text] = self._aggregate_call(call, source, pre, arguments, len(calls))
        before = self._calc(source, tuple(pre), condition)
        selected = ", ".join([*key, *(call.describe() for call in calls.values())])
        description = f"GroupAggregate(groupBy=[{', '.join(key)}], select=[{selected}])"
        node = self._add(
            GroupAggregate(
                id=0,
                inputs=(before.node_id,),
                key=tuple(key),
                aggregates=tuple(calls.values()),
                state=_state(GroupAggregate.STATE_NAMES, self.job_ttl, hint_ttl),
            ),
            description,
        )
        aggregated = Relation.of(node.id, [*key, *(call.output for call in calls.values())], None)
        for grouping, name in zip(groupings, key, strict=True):
            if isinstance(grouping, exp.Column):
                for qualifier in (grouping.table.lower() or None, None):
                    aggregated.names[(qualifier, grouping.name.lower())] = [quote_part(name)]
        projection = []
        for expression in query.expressions:
            output = expression.alias_or_name if isinstance(expression, exp.Alias | exp.Column) else None
            replaced = _replace_aggregates(expression.unalias(), calls, grouped)
            text = self._rewritten(replaced, aggregated)
            projection.append(f"{text} AS {quote_part(output or expression.sql(DIALECT))}")
        condition = _replace_aggregates(having.this, calls, grouped) if having else None
        return self._calc(aggregated, tuple(projection), condition)

    def _aggregate_call(
        self, call: exp.Expression, source: Relation, pre: list[str], arguments: dict[str, str], index: int
    ) -> AggregateCall:
        function = _AGGREGATES.get(type(call))
        if function is None:
            raise SpecError(
                f"aggregate {call.sql(DIALECT)} is not supported: use COUNT, COUNT(DISTINCT), SUM, MIN, MAX or AVG"
            )
        argument = call.this
        distinct = isinstance(argument, exp.Distinct)
        if distinct:
            if len(argument.expressions) != 1:
                raise SpecError(f"{call.sql(DIALECT)}: count the distinct values of one expression")
            argument = argument.expressions[0]
        if distinct and function != "count":
            raise SpecError(f"{call.sql(DIALECT)}: DISTINCT is supported in COUNT only")
        if isinstance(argument, exp.Star):
            column = None
        elif isinstance(argument, exp.Column):
            column = _unquoted(source.resolve(argument))
            if quote_part(column) not in pre:
                pre.append(quote_part(column))
        else:
            text = self._rewritten(argument, source)
            if text not in arguments:
                arguments[text] = f"__arg{len(arguments)}"
                pre.append(f"{text} AS {quote_part(arguments[text])}")
            column = arguments[text]
        return AggregateCall(function=function, column=column, output=f"__agg{index}", distinct=distinct)

    # -- projections ----------------------------------------------------------------------------------------------

    def _projection(self, expressions: Sequence[exp.Expression], relation: Relation) -> tuple[str, ...]:
        projection: list[str] = []
        for expression in expressions:
            if isinstance(expression, exp.Star):
                projection.extend(relation.star(None))
            elif isinstance(expression, exp.Column) and isinstance(expression.this, exp.Star):
                projection.extend(relation.star(expression.table))
            elif list(expression.find_all(exp.Window)):
                raise SpecError(f"{expression.sql(DIALECT)}: window functions are supported only for deduplication")
            else:
                text = self._rewritten(expression.unalias(), relation)
                name = expression.alias_or_name if isinstance(expression, exp.Alias | exp.Column) else None
                projection.append(f"{text} AS {quote_part(name or expression.sql(DIALECT))}")
        return tuple(projection)

    def _rewritten(self, expression: exp.Expression, relation: Relation) -> str:
        """``expression`` as Spark SQL over ``relation``'s columns: every column reference resolved."""

        def resolve(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
                return sqlglot.parse_one(relation.resolve(node), read=DIALECT)
            return node

        return expression.copy().transform(resolve).sql(DIALECT)

    def _calc(self, relation: Relation, projection: tuple[str, ...], condition: exp.Expression | None) -> Relation:
        """A projection and filter over ``relation``'s names (left out when it would change nothing)."""
        condition_sql = self._rewritten(condition, relation) if condition is not None else None
        if condition_sql is None and list(projection) == relation.star(None):
            return relation
        calc = Calc(id=0, inputs=(relation.node_id,), projection=projection, condition=condition_sql)
        node = self._add(calc, _calc_description(projection, condition_sql))
        return Relation.of(node.id, [column.name for column in node.output_schema], None)

    def _filter(self, relation: Relation, conditions: Sequence[exp.Expression]) -> Relation:
        """``relation``'s rows that meet ``conditions``, reached by the same names (a filter before or after a
        join)."""
        if not conditions:
            return relation
        projection = tuple(relation.star(None))
        condition_sql = self._rewritten(_and(conditions), relation)
        calc = Calc(id=0, inputs=(relation.node_id,), projection=projection, condition=condition_sql)
        node = self._add(calc, _calc_description(projection, condition_sql))
        return dataclasses.replace(relation, node_id=node.id, names={k: list(v) for k, v in relation.names.items()})

    # -- nodes ----------------------------------------------------------------------------------------------------

    def _add(self, node: Node, description: str | None) -> Node:
        """Give ``node`` the next id, let Spark analyse it, and record its output schema."""
        node = dataclasses.replace(node, id=len(self.nodes) + 1)
        self.pipeline.add(node)
        node = dataclasses.replace(node, output_schema=self.pipeline.columns(node.id), description=description or "")
        self.nodes.append(node)
        return node


def compile_plan(
    spark: SparkSession,
    inserts: Sequence[str],
    configuration: dict[str, str],
    postgres_sinks: Sequence[PostgresUpsertSink] = (),
    table_upsert_sinks: Sequence[TableUpsertSink] = (),
    declared_sources: Sequence[KafkaTopicSource] = (),
    kafka_connections: Mapping[str, Mapping[str, str]] | None = None,
    kafka_sinks: Sequence[KafkaUpsertSink] = (),
) -> CompiledPlan:
    """The plan of a ``COMPILE PLAN``'s INSERT statements (one, or a statement set's)."""
    return PlanCompiler(
        spark, configuration, postgres_sinks, table_upsert_sinks, declared_sources, kafka_connections, kafka_sinks
    ).compile(inserts)


def _state(names: tuple[str, ...], job_ttl: timedelta, *hinted: timedelta | None) -> tuple[StateEntry, ...]:
    """A stateful node's entries: the job's TTL, or a hint's for the inputs it names."""
    entries = default_entries(names, job_ttl)
    return tuple(
        dataclasses.replace(entry, ttl=hint) if index < len(hinted) and (hint := hinted[index]) is not None else entry
        for index, entry in enumerate(entries)
    )


def _state_ttl_hint(query: exp.Select) -> dict[str, timedelta]:
    """The ``STATE_TTL`` hints of a query block (``core.plan.hints``), by lower-case table name or alias."""
    hint = query.args.get("hint")
    items = hint.expressions if hint else []
    return state_ttls(pairs for item in items if (pairs := hint_pairs(item)) is not None)


def _unused_hints(ttls: dict[str, timedelta], used: Sequence[str]) -> None:
    unused = sorted(set(ttls) - set(used))
    if unused:
        raise SpecError(
            f"STATE_TTL names {unused}, which are not inputs of a join or an aggregation in its query block: name a "
            "table or alias of that block"
        )


def _aggregate_calls(expression: exp.Expression) -> Iterator[exp.Expression]:
    yield from expression.find_all(exp.AggFunc)


def _replace_aggregates(expression: exp.Expression, calls: dict[str, AggregateCall], grouped: dict[str, str]) -> Any:
    def replace(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.AggFunc):
            return exp.column(calls[node.sql(DIALECT).lower()].output, quoted=True)
        if not isinstance(node, exp.Column | exp.Identifier | exp.Literal) and node.sql(DIALECT).lower() in grouped:
            return exp.column(grouped[node.sql(DIALECT).lower()], quoted=True)
        return node

    return expression.copy().transform(replace)


def _conjuncts(condition: exp.Expression) -> list[exp.Expression]:
    return list(condition.flatten()) if isinstance(condition, exp.And) else [condition]


def _and(conditions: Sequence[exp.Expression]) -> exp.Expression:
    return exp.and_(*conditions) if len(conditions) > 1 else conditions[0]


def _calc_description(projection: Sequence[str], condition: str | None) -> str:
    where = f", where=[{condition}]" if condition else ""
    return f"Calc(select=[{', '.join(projection)}]{where})"


def _pushed_down(
    where: list[exp.Expression], left: Relation, right: Relation, join: exp.Join
) -> tuple[list[exp.Expression], list[exp.Expression]]:
    """The WHERE conjuncts that filter one side of ``join`` before it: on either side of an inner join, on the left
    side of a left join (a right-side condition after a left join also drops the rows padded with nulls)."""
    left_join = join.text("side").upper() == "LEFT"
    left_filter, right_filter = [], []
    for conjunct in list(where):
        columns = list(conjunct.find_all(exp.Column))
        if not columns or conjunct.find(exp.AggFunc) or conjunct.find(exp.Subquery):
            continue
        if all(_reaches(left, c) and not _reaches(right, c) for c in columns):
            left_filter.append(conjunct)
        elif not left_join and all(_reaches(right, c) and not _reaches(left, c) for c in columns):
            right_filter.append(conjunct)
        else:
            continue
        where.remove(conjunct)
    return left_filter, right_filter


def _is_first_row(condition: exp.Expression, alias: str) -> bool:
    limit = _ROW_NUMBER_ONE.get(type(condition))
    return (
        limit is not None
        and isinstance(condition.this, exp.Column)
        and condition.this.name.lower() == alias.lower()
        and isinstance(condition.expression, exp.Literal)
        and condition.expression.name == str(limit)
    )


def _is_proctime(expression: exp.Expression) -> bool:
    if isinstance(expression, exp.Column):
        return expression.name.lower() == "proctime"
    return (
        isinstance(expression, exp.Anonymous) and expression.name.upper() == "PROCTIME" and not expression.expressions
    )


def _reaches(relation: Relation, column: exp.Column) -> bool:
    qualifier = column.table.lower() if column.table else None
    return bool(relation.names.get((qualifier, column.name.lower())))


def _unquoted(sql: str) -> str:
    return sql[1:-1].replace("``", "`") if sql.startswith("`") else sql
