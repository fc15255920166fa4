"""The parts of docs/ made from the code (scripts/docs_generated.py) match the code as it is."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "docs_generated.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_generated", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_parts_of_the_docs_are_up_to_date() -> None:
    stale = [str(page.name) for page in _generator().stale()]
    assert stale == [], f"out of date: {stale}; run python scripts/docs_generated.py --write"


def test_the_layout_lists_every_module_and_the_job_kinds_every_kind() -> None:
    from spark_tables.core.kinds import KINDS

    generator = _generator()
    layout, kinds = generator.layout(), generator.job_kinds()
    for module in generator.modules():
        assert f" {module.rpartition('/')[2]} " in layout, module
    assert [line.split("`")[1] for line in kinds.splitlines()[2:]] == sorted(KINDS)


def test_every_module_is_on_a_layer_the_pages_name() -> None:
    """A new top-level package must be given its layer, else its modules would be listed as provider metadata."""
    generator = _generator()
    unplaced = [module for module in generator.modules() if generator.layer(module) not in generator.LAYERS]
    assert unplaced == ["get_provider_info.py"]


def test_a_page_out_of_date_is_found(tmp_path: Path, monkeypatch) -> None:
    generator = _generator()
    page = tmp_path / "ctas.md"
    page.write_text("# CTAS\n\n<!-- generated: modules -->\nan old list\n<!-- end generated -->\n")
    monkeypatch.setattr(generator, "parts", lambda: {page: {"modules": generator.capability_modules("ctas")}})
    assert generator.stale() == [page]
    generator.main(["--write"])
    assert generator.stale() == [] and "`core/ctas/job.py`" in page.read_text()
    assert page.read_text().endswith("<!-- end generated -->\n")
