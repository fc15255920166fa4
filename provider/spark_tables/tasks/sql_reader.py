"""The one SQL reader: Spark SQL scripts split into statements, and what each statement is, through sqlglot's Spark
tokenizer, on the Airflow side where a job spec is built.

The reader reads only the structure the provider needs: where statements end (semicolons outside strings, comments
and plan statement sets), the table a statement writes, the parts of a ``CREATE TABLE ... AS SELECT``, a cached
view's name and query, and the plan statements' words around the plan's URI. It reads tokens rather than sqlglot's
parse trees: sqlglot's parser refuses statements Spark runs (``REPLACE TABLE ... AS``, ``TBLPROPERTIES ('k' 'v')``,
``INSERT OVERWRITE DIRECTORY ... USING``) and gives a statement's text back regenerated, where a job runs it as
written. Everything else in a statement is Spark's to judge when it runs. What the reader makes (``core.sql``,
``core.ctas``, ``core.plan`` dataclasses) travels in the job spec, so the Spark side parses no statement itself.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from spark_tables.core.cache.table import CachedTable
from spark_tables.core.ctas.statement import CtasStatement
from spark_tables.core.errors import SpecError
from spark_tables.core.identifiers import PLAIN_NAME, TableIdentifier
from spark_tables.core.plan.hints import hint_pairs, state_ttls
from spark_tables.core.plan.statements import PlanStatement, shown
from spark_tables.core.sql.job import statement_list
from spark_tables.core.sql.statement import SqlStatement


class _Tokenizer(Spark.Tokenizer):
    #: No statement is read as an opaque command: ``EXPLAIN PLAN '<uri>'`` is the provider's, word by word.
    COMMANDS: ClassVar[set[TokenType]] = set()


_STRINGS = (TokenType.STRING, TokenType.RAW_STRING)
_WORD = re.compile(r"[A-Za-z0-9_]+")
_QUERY_STARTS = ("SELECT", "WITH", "FROM", "VALUES", "TABLE", "(")
_CTAS_HEADS = (("CREATE", "TABLE"), ("CREATE", "OR", "REPLACE", "TABLE"), ("REPLACE", "TABLE"))
_WRITE_HEADS = (
    *(("CREATE", *head, "TABLE") for head in ((), ("OR", "REPLACE"), ("EXTERNAL",), ("OR", "REPLACE", "EXTERNAL"))),
    ("REPLACE", "TABLE"),
    *(("INSERT", verb, *table) for verb in ("INTO", "OVERWRITE") for table in (("TABLE",), ())),
    ("MERGE", "INTO"),
    ("UPDATE",),
    ("DELETE", "FROM"),
)
_PLAN_HEADS = {
    ("COMPILE", "PLAN"): "compile",
    ("COMPILE", "AND", "EXECUTE", "PLAN"): "compile_and_execute",
    ("EXECUTE", "PLAN"): "execute",
    ("EXPLAIN", "PLAN"): "explain",
}
_CACHED_VIEW_HEADS = tuple(
    ("CREATE", *replace, temp, "VIEW") for replace in ((), ("OR", "REPLACE")) for temp in ("TEMP", "TEMPORARY")
)
_CLAUSES = {"USING": "format", "PARTITIONED BY": "partitioned_by", "LOCATION": "location", "COMMENT": "comment"}
_CLAUSES["TBLPROPERTIES"] = "properties"
_CTAS_FORM = (
    "sql is not a CTAS statement: write CREATE TABLE [IF NOT EXISTS] name [USING format] "
    "[PARTITIONED BY (columns)] [LOCATION 'path'] [COMMENT '...'] [TBLPROPERTIES (...)] AS SELECT ..."
)
_PLAN_FORMS = (
    "write COMPILE [AND EXECUTE] PLAN [IF NOT EXISTS] '<uri>' FOR INSERT ..., EXECUTE PLAN [IF EXISTS] '<uri>' or "
    "EXPLAIN PLAN '<uri>'"
)


@dataclass
class _Text:
    """A statement's text and its tokens (those before an unclosed quote or comment, when it has one)."""

    text: str
    tokens: list[Token]
    #: False when an unclosed quote or comment stopped the tokenizer: Spark says what is wrong when it runs it.
    complete: bool = True

    @classmethod
    def of(cls, text: str) -> _Text:
        tokenizer = _Tokenizer(dialect="spark")
        try:
            return cls(text, tokenizer.tokenize(text))
        except TokenError:
            return cls(text, list(tokenizer.tokens), complete=False)

    @property
    def empty(self) -> bool:
        """Whether the text holds nothing but white space and comments."""
        return self.complete and not self.tokens

    @property
    def body(self) -> list[Token]:
        """The tokens without the final semicolons."""
        end = len(self.tokens)
        while end and self.tokens[end - 1].token_type == TokenType.SEMICOLON:
            end -= 1
        return self.tokens[:end]

    def word(self, index: int) -> str | None:
        """The keyword or name at ``index`` in upper case (None for a literal, a quoted name, or past the end)."""
        if index >= len(self.tokens) or self.tokens[index].token_type in (*_STRINGS, TokenType.IDENTIFIER):
            return None
        return " ".join(self.tokens[index].text.upper().split())

    def starts(self, index: int, *words: str) -> bool:
        return all(self.word(index + offset) == word for offset, word in enumerate(words))

    def head(self, heads: Sequence[tuple[str, ...]], index: int = 0) -> int | None:
        """The index after the longest of ``heads`` the tokens start with at ``index``, or None."""
        found = [index + len(head) for head in heads if self.starts(index, *head)]
        return max(found) if found else None

    def between(self, first: int, last: int) -> str:
        """The text from token ``first`` to token ``last``, both included."""
        return self.text[self.tokens[first].start : self.tokens[last].end + 1]

    def rest(self, index: int) -> str:
        """The text from token ``index`` (or after the last token) to the end."""
        if index < len(self.tokens):
            return self.text[self.tokens[index].start :]
        return self.text[self.tokens[-1].end + 1 :] if self.tokens else self.text

    def adjacent(self, index: int) -> bool:
        """Whether token ``index`` touches the one before it."""
        return 0 < index < len(self.tokens) and self.tokens[index].start == self.tokens[index - 1].end + 1

    def string(self, index: int) -> tuple[str, int] | None:
        """The string literal at ``index`` as Spark reads it, and the index after it; a doubled quote inside it
        (two literals touching, to the tokenizer) stands for one quote."""
        if index >= len(self.tokens) or self.tokens[index].token_type not in _STRINGS:
            return None
        value = self.tokens[index].text
        index += 1
        while index < len(self.tokens) and self.tokens[index].token_type in _STRINGS and self.adjacent(index):
            value += "'" + self.tokens[index].text
            index += 1
        return value, index

    def group(self, index: int) -> tuple[int, int, str]:
        """For the ``(`` at ``index``: the index of its first inner token, of its ``)`` (or the end), and the text
        between the parentheses."""
        depth, close = 0, index
        while close < len(self.tokens):
            depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(self.tokens[close].token_type, 0)
            if depth == 0:
                return index + 1, close, self.text[self.tokens[index].end + 1 : self.tokens[close].start]
            close += 1
        after = self.tokens[index].end + 1  # unclosed: up to the next ")" as written, for the message
        end = self.text.find(")", after)
        return index + 1, len(self.tokens), self.text[after : end if end >= 0 else len(self.text)]


# -- scripts --------------------------------------------------------------------------------------------------------


def split_script(sql: str) -> list[str]:
    """A script's statements: split on the semicolons outside strings and comments, each without its semicolon and
    surrounding white space; a statement of comments only is dropped. Text after an unclosed quote or comment is
    one statement, for Spark to judge."""
    read = _Text.of(sql)
    statements, start = [], 0
    for token in read.tokens:
        if token.token_type == TokenType.SEMICOLON:
            statements.append(sql[start : token.start])
            start = token.end + 1
    statements.append(sql[start:])
    return [statement.strip() for statement in statements if not _Text.of(statement).empty]


def join_statement_sets(statements: Sequence[str]) -> list[str]:
    """Statements split on ``;`` with each plan's ``STATEMENT SET BEGIN ...; ...; END`` put back together in one."""
    joined: list[str] = []
    open_set: list[str] | None = None
    for statement in statements:
        read = _Text.of(statement) if isinstance(statement, str) else _Text("", [])
        if open_set is not None:
            open_set.append(statement)
            if [read.word(index) for index in range(len(read.body))] == ["END"]:
                joined.append(";\n".join(open_set))
                open_set = None
            continue
        if _plan_head(read) is not None and _opens_set(read):
            open_set = [statement]
            continue
        joined.append(statement)
    if open_set is not None:
        raise SpecError(f"{shown(open_set[0])}: its STATEMENT SET has no END: close it with END")
    return joined


def read_statements(statements: Any) -> tuple[SqlStatement, ...]:
    """A SQL job's statements, each with what it is: the table it writes, its CTAS or plan statement."""
    read = []
    for number, text in enumerate(statement_list(statements), start=1):
        if not isinstance(text, str) or _Text.of(text).empty:
            raise SpecError(f"sql job: statement {number} is empty: remove it or give its SQL text")
        try:
            read.append(read_statement(text))
        except SpecError as err:
            raise SpecError(f"sql job: statement {number}: {err}") from None
    return tuple(read)


def read_statement(text: str) -> SqlStatement:
    read = _Text.of(text)
    summary = shown(read.rest(0), 80)
    if _plan_head(read) is not None:
        return SqlStatement(text=text, summary=summary, plan=_plan_statement(read))
    ctas = _ctas(read) if _is_ctas(read) else None
    return SqlStatement(text=text, summary=summary, writes=_written_table(read), ctas=ctas)


# -- the table a statement writes -----------------------------------------------------------------------------------


def _written_table(read: _Text) -> str | None:
    after = read.head(_WRITE_HEADS)
    if after is None or read.word(after) in ("DIRECTORY", "LOCAL"):
        return None
    if read.starts(after, "IF", "NOT", "EXISTS") and read.word(0) == "CREATE":
        after += 3
    return str(TableIdentifier.parse(_name(read, after)[0]))


def _name(read: _Text, index: int) -> tuple[str, int]:
    """The table name at ``index`` as written, and the index after it. A name touching what follows (``my-table``)
    is the whole word, for the message that it is not a name."""
    end = index
    if _is_name_part(read, end):
        end += 1
        while read.word(end) == "." and _is_name_part(read, end + 1):
            end += 2
    nothing_after = end >= len(read.tokens) or read.tokens[end].token_type in (TokenType.L_PAREN, TokenType.SEMICOLON)
    if end > index and (nothing_after or not read.adjacent(end)):
        return read.between(index, end - 1), end
    return (read.rest(index).split() or [""])[0], end


def _is_name_part(read: _Text, index: int) -> bool:
    if index >= len(read.tokens):
        return False
    token = read.tokens[index]
    return token.token_type == TokenType.IDENTIFIER or (
        token.token_type not in _STRINGS and bool(_WORD.fullmatch(token.text))
    )


# -- CREATE TABLE ... AS SELECT -------------------------------------------------------------------------------------


def _is_ctas(read: _Text) -> bool:
    """Whether a statement creates or replaces a table from a query (``CREATE [OR REPLACE] TABLE ... AS query``,
    ``REPLACE TABLE ... AS query``), whatever its clauses: ``_ctas`` says whether it can read them."""
    after = read.head(_CTAS_HEADS)
    if after is None or not _is_name_part(read, after):
        return False
    depth = 0
    for index in range(after, len(read.tokens)):
        kind = read.tokens[index].token_type
        depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(kind, 0)
        if depth == 0 and read.word(index) == "AS" and read.word(index + 1) in _QUERY_STARTS:
            return True
    return False


def read_ctas(statement: Any) -> CtasStatement:
    """The parts of a ``CREATE TABLE ... AS SELECT`` statement; ``SpecError`` naming what cannot be read."""
    if not isinstance(statement, str):
        raise SpecError(f"sql must be one CREATE TABLE ... AS SELECT statement, not {type(statement).__name__}")
    return _ctas(_Text.of(statement))


def _ctas(read: _Text) -> CtasStatement:
    after = read.head(_CTAS_HEADS)
    if after is None:
        raise SpecError(_CTAS_FORM)
    fields: dict[str, Any] = {"replace": read.word(0) == "REPLACE" or read.starts(0, "CREATE", "OR", "REPLACE")}
    fields["if_not_exists"] = read.starts(after, "IF", "NOT", "EXISTS")
    index = after + 3 if fields["if_not_exists"] else after
    if not _is_name_part(read, index):
        raise SpecError(_CTAS_FORM)
    fields["table"], index = _name(read, index)
    while read.word(index) != "AS":
        clause = _CLAUSES.get(read.word(index) or "")
        value, after_clause = _clause(read, clause, index + 1) if clause else (None, index)
        if after_clause == index:
            shown_rest = " ".join(read.rest(index).split()[:3]) if index < len(read.body) else ""
            raise SpecError(
                f"CTAS statement: unexpected {shown_rest or 'the end of the statement'!r} before AS: use only USING, "
                "PARTITIONED BY (columns), LOCATION, COMMENT and TBLPROPERTIES, then AS followed by the query"
            )
        if clause in fields:
            raise SpecError(f"CTAS statement gives {clause.replace('_', ' ')} twice: give it once")
        fields[clause] = value
        index = after_clause
    fields["query"] = nestable_query(read.rest(index + 1) if index + 1 < len(read.tokens) else "", "ctas job")
    return CtasStatement(**fields)


def _clause(read: _Text, clause: str, index: int) -> tuple[Any, int]:
    """A clause's value and the index after it; the same index when the clause cannot be read."""
    if clause == "format":
        word = read.word(index)
        return (read.tokens[index].text, index + 1) if word and PLAIN_NAME.fullmatch(word) else (None, index - 1)
    if clause in ("location", "comment"):
        literal = read.string(index)
        return literal if literal else (None, index - 1)
    if read.word(index) != "(":
        return None, index - 1
    first, close, inner = read.group(index)
    if clause == "partitioned_by":
        return _partition_columns(read, first, close, inner), close + 1
    return _properties(read, first, close, inner), close + 1


def _partition_columns(read: _Text, first: int, close: int, inner: str) -> list[str]:
    invalid = SpecError(f"CTAS statement: PARTITIONED BY ({inner.strip()}) is invalid: list column names")
    if close == len(read.tokens):  # unclosed
        raise invalid
    if first == close:
        raise SpecError("CTAS statement: PARTITIONED BY () names no column: list the columns")
    columns = []
    for position, token in enumerate(read.tokens[first:close]):
        if position % 2:
            if token.token_type != TokenType.COMMA:
                raise invalid
        elif (token.token_type == TokenType.IDENTIFIER and token.text) or (
            token.token_type not in (*_STRINGS, TokenType.IDENTIFIER) and PLAIN_NAME.fullmatch(token.text)
        ):
            columns.append(token.text)
        else:
            raise invalid
    if (close - first) % 2 == 0:  # a trailing comma
        raise invalid
    return columns


def _properties(read: _Text, first: int, close: int, inner: str) -> dict[str, str]:
    invalid = SpecError(f"CTAS statement: TBLPROPERTIES ({inner.strip()}) is invalid: write ('key' = 'value', ...)")
    if close == len(read.tokens):  # unclosed
        raise invalid
    properties, index = {}, first
    while index < close:
        key = read.string(index) or _dotted_key(read, index)
        if key is None:
            raise invalid
        index = key[1] + 1 if read.word(key[1]) == "=" else key[1]
        value = read.string(index)
        if value is None or value[1] > close:
            raise invalid
        properties[key[0]] = value[0]
        index = value[1]
        if index < close:
            if read.tokens[index].token_type != TokenType.COMMA or index + 1 == close:  # none, or a trailing one
                raise invalid
            index += 1
    return properties


def _dotted_key(read: _Text, index: int) -> tuple[str, int] | None:
    """A property key of dotted words (``retention.days``) and the index after it."""
    if read.tokens[index].token_type == TokenType.IDENTIFIER or not _is_name_part(read, index):
        return None
    end = index + 1
    while read.word(end) == "." and _is_name_part(read, end + 1):
        end += 2
    return read.between(index, end - 1), end


# -- queries --------------------------------------------------------------------------------------------------------


def nestable_query(query: Any, what: str) -> str:
    """``query`` ready to nest (without its final semicolon and what follows it); ``SpecError`` unless it is a
    query (a command cannot be nested). ``what`` names its place in the message."""
    read = _Text.of(query) if isinstance(query, str) else _Text("", [])
    body = read.body
    if not body or read.word(0) not in _QUERY_STARTS:
        raise SpecError(f"{what}: query must be a query (SELECT, WITH, FROM, VALUES or TABLE ...), not a command")
    return query[: body[-1].end + 1] if read.complete else query


def split_cached_views(statements: Sequence[str]) -> tuple[tuple[str, ...], tuple[CachedTable, ...]]:
    """The statements that are not ``CREATE TEMPORARY VIEW ... CACHED AS``, and the cached tables those declare."""
    rest: list[str] = []
    declared: list[CachedTable] = []
    for statement in statements:
        table = _cached_view(_Text.of(statement)) if isinstance(statement, str) else None
        if table is None:
            rest.append(statement)
            continue
        if any(other.name == table.name for other in declared):
            raise SpecError(f"cached view {table.name} is declared twice: declare it once")
        declared.append(table)
    return tuple(rest), tuple(declared)


def _cached_view(read: _Text) -> CachedTable | None:
    after = read.head(_CACHED_VIEW_HEADS)
    cached = next((index for index in range(after or 0, len(read.tokens)) if read.starts(index, "CACHED", "AS")), None)
    if after is None or cached is None or cached == after:
        return None
    table = CachedTable(name=read.between(after, cached - 1), query=read.rest(cached + 2))  # its name checked first
    return CachedTable(name=table.name, query=nestable_query(table.query, f"cached table {table.name}"))


def check_cached_table(table: CachedTable) -> None:
    """A cached table's query is a query (a command cannot be cached)."""
    if table.query is not None:
        nestable_query(table.query, f"cached table {table.name}")


# -- plan statements ------------------------------------------------------------------------------------------------


def read_plan_statement(statement: str) -> PlanStatement:
    """The plan statement ``statement`` is; ``SpecError`` naming what is wrong with it otherwise, a compile's
    ``STATE_TTL`` hints included (the compiler reads them again, on the driver)."""
    parsed = _plan_statement(_Text.of(statement))
    for insert in parsed.inserts:
        _check_state_ttl_hints(insert)
    return parsed


def _check_state_ttl_hints(insert: str) -> None:
    """``SpecError``, worded as the compiler's, for a ``STATE_TTL`` hint of any query block of a compile's INSERT
    that does not read (``core.plan.hints``). An INSERT sqlglot cannot parse is left to the compiler, which says why."""
    try:
        tree = sqlglot.parse_one(insert, read="spark")
    except sqlglot.errors.ParseError:
        return
    for hint in tree.find_all(exp.Hint) if tree is not None else ():
        try:
            state_ttls(pairs for item in hint.expressions if (pairs := hint_pairs(item)) is not None)
        except SpecError as err:
            raise SpecError(f"COMPILE PLAN, {shown(insert)}: {err}") from None


def _plan_head(read: _Text) -> tuple[str, int] | None:
    after = read.head(list(_PLAN_HEADS))
    if after is None:
        return None
    return next(action for head, action in _PLAN_HEADS.items() if len(head) == after and read.starts(0, *head)), after


def _plan_statement(read: _Text) -> PlanStatement:
    head = _plan_head(read)
    body = read.body
    text = shown(read.between(0, len(body) - 1)) if body else ""
    if head is None:
        raise SpecError(f"{text} is not a plan statement: {_PLAN_FORMS}")
    action, index = head
    flags = {}
    if action.startswith("compile") and read.starts(index, "IF", "NOT", "EXISTS"):
        flags["if_not_exists"], index = True, index + 3
    elif action == "execute" and read.starts(index, "IF", "EXISTS"):
        flags["if_exists"], index = True, index + 2
    uri = read.string(index)
    if uri is None:
        raise SpecError(f"{text} is not a plan statement: {_PLAN_FORMS}")
    index = uri[1]
    inserts: tuple[str, ...] = ()
    if action.startswith("compile"):
        if index == len(body) or (read.word(index) == "FOR" and index + 1 == len(body)):
            raise SpecError(f"{text}: say what to compile: FOR INSERT INTO <table> SELECT ...")
        if read.word(index) != "FOR":
            raise SpecError(f"{text} is not a plan statement: {_PLAN_FORMS}")
        inserts = _inserts(read, index + 1, len(body))
        index = len(body)
    if index != len(body):
        raise SpecError(f"{text} is not a plan statement: {_PLAN_FORMS}")
    return PlanStatement(action=action, uri=uri[0], inserts=inserts, text=read.text, **flags)


def _opens_set(read: _Text) -> bool:
    """Whether a compile's body opens a statement set it does not close."""
    start = next((i for i in range(len(read.tokens)) if read.starts(i, "FOR", "STATEMENT", "SET", "BEGIN")), None)
    return start is not None and read.word(len(read.body) - 1) != "END"


def _inserts(read: _Text, first: int, end: int) -> tuple[str, ...]:
    """A compile's INSERT statements: the body, or a statement set's, split on its semicolons."""
    if read.starts(first, "STATEMENT", "SET", "BEGIN") and read.word(end - 1) == "END":
        parts, start = [], first + 3
        for index in range(first + 3, end):
            if index == end - 1 or read.tokens[index].token_type == TokenType.SEMICOLON:
                if index > start:
                    parts.append((start, index - 1))
                start = index + 1
        if not parts:
            raise SpecError("the STATEMENT SET is empty: put INSERT INTO statements between BEGIN and END")
    else:
        parts = [(first, end - 1)]
    for start, last in parts:
        if not (read.starts(start, "INSERT", "INTO") or read.starts(start, "INSERT", "OVERWRITE")):
            raise SpecError(
                f"{shown(read.between(start, last))} is not an INSERT: a compiled plan writes its results, so compile "
                "INSERT INTO <table> SELECT ... (or a STATEMENT SET of them); a plain SELECT writes nowhere"
            )
    return tuple(read.between(start, last) for start, last in parts)
