"""The plan statements, read from their text: the words around the plan's URI, as Flink spells them.

```
COMPILE PLAN [IF NOT EXISTS] '<uri>' FOR INSERT INTO ... | STATEMENT SET BEGIN INSERT ...; INSERT ...; END
COMPILE AND EXECUTE PLAN '<uri>' FOR ...
EXECUTE PLAN [IF EXISTS] '<uri>'
EXPLAIN PLAN '<uri>'
```

Only these words are read here; what follows ``FOR`` is Spark SQL, which the compiler parses.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from spark_tables.core.errors import SpecError
from spark_tables.core.statements import strip_final_semicolon, strip_leading_comments

_URI = r"'(?P<uri>(?:[^']|'')*)'"
_COMPILE = re.compile(
    rf"COMPILE\s+(?P<execute>AND\s+EXECUTE\s+)?PLAN\s+(?P<if_not_exists>IF\s+NOT\s+EXISTS\s+)?{_URI}\s*"
    r"(?:FOR\b\s*(?P<body>.*))?",
    re.IGNORECASE | re.DOTALL,
)
_EXECUTE = re.compile(rf"EXECUTE\s+PLAN\s+(?P<if_exists>IF\s+EXISTS\s+)?{_URI}\s*", re.IGNORECASE | re.DOTALL)
_EXPLAIN = re.compile(rf"EXPLAIN\s+PLAN\s+{_URI}\s*", re.IGNORECASE | re.DOTALL)
_STARTS = re.compile(r"(?:COMPILE\s+(?:AND\s+EXECUTE\s+)?PLAN|EXECUTE\s+PLAN|EXPLAIN\s+PLAN)\b", re.IGNORECASE)
_STATEMENT_SET = re.compile(r"STATEMENT\s+SET\s+BEGIN\b(?P<inner>.*?)\bEND\s*", re.IGNORECASE | re.DOTALL)
_OPENS_SET = re.compile(r"\bSTATEMENT\s+SET\s+BEGIN\b", re.IGNORECASE)
_INSERT = re.compile(r"INSERT\s+(?:INTO|OVERWRITE)\b", re.IGNORECASE)
_END = re.compile(r"END\s*", re.IGNORECASE)


@dataclass(frozen=True)
class PlanStatement:
    """One plan statement: what to do (``compile``, ``compile_and_execute``, ``execute``, ``explain``), the plan's
    URI, and for a compile the SQL of its INSERT statement(s) in one text (a statement set's body as written)."""

    action: str
    uri: str
    body: str = ""
    if_not_exists: bool = False
    if_exists: bool = False

    @property
    def compiles(self) -> bool:
        return self.action in ("compile", "compile_and_execute")

    @property
    def executes(self) -> bool:
        return self.action in ("execute", "compile_and_execute")


def is_plan_statement(statement: str) -> bool:
    return bool(_STARTS.match(strip_leading_comments(statement)))


def parse_plan_statement(statement: str) -> PlanStatement:
    """The plan statement ``statement`` is; ``SpecError`` naming what is wrong with it otherwise."""
    text = strip_final_semicolon(strip_leading_comments(statement))
    if match := _COMPILE.fullmatch(text):
        action = "compile_and_execute" if match.group("execute") else "compile"
        body = (match.group("body") or "").strip()
        if not body:
            raise SpecError(f"{_shown(text)}: say what to compile: FOR INSERT INTO <table> SELECT ...")
        return PlanStatement(
            action=action, uri=_uri(match), body=_checked_body(body), if_not_exists=bool(match.group("if_not_exists"))
        )
    if match := _EXECUTE.fullmatch(text):
        return PlanStatement(action="execute", uri=_uri(match), if_exists=bool(match.group("if_exists")))
    if match := _EXPLAIN.fullmatch(text):
        return PlanStatement(action="explain", uri=_uri(match))
    raise SpecError(
        f"{_shown(text)} is not a plan statement: write COMPILE [AND EXECUTE] PLAN [IF NOT EXISTS] '<uri>' FOR "
        "INSERT ..., EXECUTE PLAN [IF EXISTS] '<uri>' or EXPLAIN PLAN '<uri>'"
    )


def insert_statements(body: str) -> list[str]:
    """A compile's INSERT statements: the body itself, or a statement set's, split on ``;`` outside quotes."""
    match = _STATEMENT_SET.fullmatch(body)
    return [part for part in _split(match.group("inner"))] if match else [body]


def rejoin_statement_sets(statements: Sequence[str]) -> list[str]:
    """Statements split on ``;`` with each ``STATEMENT SET BEGIN ...; ...; END`` put back together in one."""
    joined: list[str] = []
    open_set: list[str] | None = None
    for statement in statements:
        if open_set is not None:
            open_set.append(statement)
            if _END.fullmatch(strip_leading_comments(statement).strip()):
                joined.append(";\n".join(open_set))
                open_set = None
            continue
        if is_plan_statement(statement) and _OPENS_SET.search(statement) and not _STATEMENT_SET.search(statement):
            open_set = [statement]
            continue
        joined.append(statement)
    if open_set is not None:
        raise SpecError(f"{_shown(open_set[0])}: its STATEMENT SET has no END: close it with END")
    return joined


def _checked_body(body: str) -> str:
    if match := _STATEMENT_SET.fullmatch(body):
        inserts = _split(match.group("inner"))
        if not inserts:
            raise SpecError("the STATEMENT SET is empty: put INSERT INTO statements between BEGIN and END")
    else:
        inserts = [body]
    for insert in inserts:
        if not _INSERT.match(strip_leading_comments(insert)):
            raise SpecError(
                f"{_shown(insert)} is not an INSERT: a compiled plan writes its results, so compile INSERT INTO "
                "<table> SELECT ... (or a STATEMENT SET of them); a plain SELECT writes nowhere"
            )
    return body


def _split(text: str) -> list[str]:
    """``text`` split on the semicolons outside quotes and comments, empty parts dropped."""
    parts, current, quote, index = [], [], "", 0
    while index < len(text):
        char = text[index]
        if quote:
            current.append(char)
            if char == quote:
                quote = ""
        elif char in "'\"`":
            quote = char
            current.append(char)
        elif text.startswith("--", index):
            end = text.find("\n", index)
            index = len(text) if end < 0 else end
            continue
        elif char == ";":
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
        index += 1
    parts.append("".join(current))
    return [part.strip() for part in parts if strip_leading_comments(part).strip()]


def _uri(match: re.Match[str]) -> str:
    uri = match.group("uri").replace("''", "'")
    if not uri.strip():
        raise SpecError("the plan's URI is empty: give a path, a file:// URI or an object storage URI (s3://...)")
    return uri


def _shown(text: str, width: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
