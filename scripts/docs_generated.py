"""The parts of docs/ made from the code, so that they cannot drift from it: the job kinds table, the package
layout and the import contracts in docs/architecture.md, each capability page's modules on each layer, and the JVM
jars jvm/pom.xml declares in docs/configuration.md.

    python scripts/docs_generated.py           # say which generated parts are out of date (exit 1 if any)
    python scripts/docs_generated.py --write   # rewrite them

Each part stands between ``<!-- generated: NAME -->`` and ``<!-- end generated -->`` in its page;
tests/unit/test_docs_generated.py fails when one is out of date.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import pkgutil
import re
import sys
import typing
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "provider" / "spark_tables"
DOCS = ROOT / "docs"
#: The one list of the JVM jars the jobs load, with their versions.
POM = ROOT / "jvm" / "pom.xml"
MAVEN = "{http://maven.apache.org/POM/4.0.0}"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"

#: The layers, in the order the pages list them, with the folders (or modules) that make each.
LAYERS = {
    "core": ("core",),
    "jobs": ("jobs",),
    "hooks": ("hooks",),
    "tasks": ("tasks",),
    "operators, sensors and triggers": ("operators", "sensors", "triggers"),
    "xcom": ("xcom",),
    "utils": ("utils",),
    "plugins": ("plugins",),
}
#: Each capability's page, and the name its modules carry: a module is the capability's when a folder on its path,
#: or its own name, is that name or starts with it and ``_`` (``core/lookup/``, ``sensors/lookup_reload.py``).
CAPABILITIES = {
    "sql": "sql-jobs.md",
    "ctas": "ctas.md",
    "cache": "cached-tables.md",
    "lookup": "lookup-joins.md",
    "plan": "compiled-plans.md",
    "aggregation": "buffered-output.md",
    "monitoring": "monitoring.md",
}
#: Folders whose modules serve several capabilities, and which.
SHARED_FOLDERS = {
    "core/streaming/": ("plan", "aggregation"),
    "jobs/streaming/": ("plan", "aggregation"),
}
#: Modules whose names do not say which capabilities they serve.
ALSO = {
    "tasks/sql_reader.py": ("sql", "ctas", "cache", "plan"),
    "tasks/states.py": ("cache", "ctas"),
    "triggers/cached_table.py": ("cache",),
    "tasks/lookup/reload_schedule.py": ("lookup",),
    "hooks/postgres.py": ("lookup", "plan", "aggregation"),
    "operators/streaming.py": ("plan", "aggregation"),
    "jobs/plan/runner.py": ("plan", "sql"),
    "utils/monitoring_urls.py": ("monitoring",),
    "operators/links.py": ("monitoring",),
    "core/xcom_keys.py": ("monitoring",),
    "operators/ctas_lifecycle.py": ("ctas", "sql"),
    "tasks/ctas/claims.py": ("ctas", "sql"),
}
#: The longest description a module gets in the layout: its docstring's first sentence, cut there.
WIDTH = 96


def modules() -> list[str]:
    """Every module of the package, as paths under it (``core/job_spec.py``), sorted."""
    found = [path.relative_to(PACKAGE) for path in PACKAGE.rglob("*.py") if path.name != "__init__.py"]
    return [str(path) for path in sorted(found, key=lambda path: (path.parent.parts, path.name))]


def summary(module: str) -> str:
    """The first sentence of a module's docstring, cut to ``WIDTH``."""
    return first_sentence(ast.get_docstring(ast.parse((PACKAGE / module).read_text())) or "")


def first_sentence(docstring: str) -> str:
    """A docstring's first sentence, cut to ``WIDTH``."""
    first = " ".join(docstring.split("\n\n")[0].split())
    sentence = re.split(r"(?<=[a-z)`'])[.:;] ", first + " ", maxsplit=1)[0].rstrip(". ")
    return sentence if len(sentence) <= WIDTH else sentence[: WIDTH - 1].rstrip() + "…"


def layer(module: str) -> str:
    top = module.split("/")[0]
    return next((name for name, folders in LAYERS.items() if top in folders), "provider metadata")


def capabilities(module: str) -> tuple[str, ...]:
    parts = [part.removesuffix(".py") for part in module.split("/")[1:]]
    named = tuple(name for name in CAPABILITIES if any(part == name or part.startswith(name + "_") for part in parts))
    shared = [names for folder, names in SHARED_FOLDERS.items() if module.startswith(folder)]
    return tuple(dict.fromkeys((*named, *ALSO.get(module, ()), *(name for names in shared for name in names))))


def layout() -> str:
    """The package's folders, each module with its docstring's first sentence."""
    lines = ["```", "provider/spark_tables/"]
    folder = None
    for module in modules():
        parent, _, name = module.rpartition("/")
        if parent != folder:
            folder = parent
            if parent:
                lines.append(f"  {parent}/")
        indent = "    " if parent else "  "
        lines.append(f"{indent}{name:<24} {summary(module)}".rstrip())
    lines.append("```")
    return "\n".join(lines)


def job_kinds() -> str:
    """Each job kind (``core.kinds``) with its job, its typed result, its runner, its facts and the operators that
    build it (or, for a kind no operator's ``build_job`` returns, the operators whose code makes its jobs)."""
    from spark_tables.core.job_kind import runs_in_session_mode
    from spark_tables.core.kinds import KINDS
    from spark_tables.jobs.entry import runner
    from spark_tables.operators.spark_job import SparkJobOperator

    operators = []
    for info in pkgutil.iter_modules([str(PACKAGE / "operators")]):
        module = importlib.import_module(f"spark_tables.operators.{info.name}")
        operators += [
            (name, cls)
            for name, cls in inspect.getmembers(module, inspect.isclass)
            if cls.__module__ == module.__name__ and issubclass(cls, SparkJobOperator) and not name.startswith("_")
        ]

    def builders(kind: str) -> str:
        job = KINDS[kind].job
        own = [name for name, cls in operators if typing.get_type_hints(cls.build_job).get("return") is job]
        if own:
            return ", ".join(f"`{name}`" for name in own)
        making = [name for name, cls in operators if re.search(rf"\b{job.__name__}\(", inspect.getsource(cls))]
        return "none of its own; made by " + ", ".join(f"`{name}`" for name in making)

    def where(thing: object) -> str:
        path = inspect.getmodule(thing).__name__.removeprefix("spark_tables.").replace(".", "/")  # type: ignore[union-attr]
        return f"`{path}.py` `{thing.__name__}`"  # type: ignore[attr-defined]

    rows = [
        "| kind | job | result | runner | may stream | session mode | operators |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind in sorted(KINDS):
        described = KINDS[kind]
        refusal = described.refused_in_session_mode
        unless = first_sentence(refusal.__doc__ or "")
        session = "yes" if refusal is runs_in_session_mode else f"yes, but not {unless[:1].lower()}{unless[1:]}"
        rows.append(
            f"| `{kind}` | {where(described.job)} | {where(described.result)} | {where(runner(kind))} "
            f"| {'yes' if described.streams else 'no'} | {session} | {builders(kind)} |"
        )
    return "\n".join(rows)


def capability_modules(capability: str) -> str:
    """A capability's modules on each layer."""
    mine = [module for module in modules() if capability in capabilities(module)]
    lines = ["| layer | modules |", "|---|---|"]
    for name in (*LAYERS, "provider metadata"):
        listed = [f"`{module}`" for module in mine if layer(module) == name]
        if listed:
            lines.append(f"| {name} | {', '.join(listed)} |")
    return "\n".join(lines)


def declared_jars() -> list[tuple[str, str, str, str]]:
    """``jvm/pom.xml``'s dependencies: group, artifact, version, and what each is for (the comment above it)."""
    pom = ET.parse(POM, ET.XMLParser(target=ET.TreeBuilder(insert_comments=True))).getroot()
    dependencies = pom.find(f"{MAVEN}dependencies")
    assert dependencies is not None, f"{POM} declares no dependencies"
    declared, purpose = [], ""
    for node in dependencies:
        if node.tag is ET.Comment:
            purpose = " ".join((node.text or "").split())
            continue
        group, artifact, version = (
            node.findtext(f"{MAVEN}{name}") or "" for name in ("groupId", "artifactId", "version")
        )
        declared.append((group, artifact, version, purpose))
        purpose = ""
    return declared


def jvm_jars() -> str:
    """The declared jars: coordinates, the file scripts/setup.sh makes of each, its address on Maven Central."""
    rows = ["| coordinates | file in the jars folder | on Maven Central | for |", "|---|---|---|---|"]
    declared = declared_jars()
    for group, artifact, version, purpose in declared:
        url = f"{MAVEN_CENTRAL}/{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.jar"
        rows.append(
            f"| `{group}:{artifact}:{version}` | `{artifact}.jar` | [{artifact}-{version}.jar]({url}) | {purpose} |"
        )
    packages = ",".join(f"{group}:{artifact}:{version}" for group, artifact, version, _ in declared)
    return "\n".join(
        [*rows, "", f"`spark.jars.packages`: `{packages}`", "", f"`spark.jars.excludes`: `{','.join(excluded())}`"]
    )


def excluded() -> list[str]:
    """The exclusions of ``jvm/pom.xml``'s dependencies but "everything" (``*:*``), as ``group:artifact``: Ivy takes
    them for every package at once (without them it fetches the AWS SDK's 686 MB bundle hadoop-aws names)."""
    pom = ET.parse(POM).getroot()
    pairs = {
        f"{node.findtext(f'{MAVEN}groupId')}:{node.findtext(f'{MAVEN}artifactId')}"
        for node in pom.iter(f"{MAVEN}exclusion")
    }
    return sorted(pairs - {"*:*"})


def contracts() -> str:
    """The import contracts ``pyproject.toml`` declares for import-linter: each one's id, rule, and the modules."""
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    rows = ["| contract | rule | modules |", "|---|---|---|"]
    for contract in declared:
        if contract["type"] == "forbidden":
            named = f"{', '.join(contract['source_modules'])} never import {', '.join(contract['forbidden_modules'])}"
            ignored = contract.get("ignore_imports", [])
            named += f" (but {'; '.join(ignored)})" if ignored else ""
        elif contract["type"] == "layers":
            layers = (layer.replace(" | ", " and ") for layer in contract["layers"])  # a bar would end the cell
            named = " over ".join(layers) + f", in {', '.join(contract['containers'])}"
        else:
            named = ", ".join(contract.get("ancestors", []))
        names = named.replace("spark_tables.", "")
        rows.append(f"| `{contract['id']}` | {contract['name']} | {names} |")
    return "\n".join(rows)


def parts() -> dict[Path, dict[str, str]]:
    """Each page's generated parts, by name."""
    pages: dict[Path, dict[str, str]] = {
        DOCS / "architecture.md": {"job-kinds": job_kinds(), "layout": layout(), "contracts": contracts()},
        DOCS / "configuration.md": {"jvm-jars": jvm_jars()},
    }
    for capability, page in CAPABILITIES.items():
        pages[DOCS / page] = {"modules": capability_modules(capability)}
    return pages


def render(text: str, generated: dict[str, str], page: Path) -> str:
    for name, body in generated.items():
        pattern = re.compile(rf"(<!-- generated: {name} -->\n)(?:.*?\n)??(<!-- end generated -->)", re.DOTALL)
        if not pattern.search(text):
            raise SystemExit(f"{page}: no '<!-- generated: {name} -->' ... '<!-- end generated -->' block")
        text = pattern.sub(lambda match, body=body: match.group(1) + body + "\n" + match.group(2), text)
    return text


def stale() -> list[Path]:
    """The pages whose generated parts differ from the code."""
    return [
        page for page, generated in parts().items() if render(page.read_text(), generated, page) != page.read_text()
    ]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Rewrite or check the generated parts of docs/.")
    parser.add_argument("--write", action="store_true", help="rewrite the pages' generated parts")
    if parser.parse_args(argv).write:
        for page, generated in parts().items():
            page.write_text(render(page.read_text(), generated, page))
        return 0
    out_of_date = stale()
    for page in out_of_date:
        print(f"{page.relative_to(ROOT)}: out of date; run python scripts/docs_generated.py --write")
    return 1 if out_of_date else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
