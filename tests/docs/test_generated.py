"""The generated docs pages must say what their sources say: docs/cli.md what msc.cli's parser
defines, docs/performance.md and README's Performance section what the committed bench results
hold. (docs/ops.md has its own check in tests/ops/test_docs.py.)"""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _script(path: str):
    """Import a script that is not in a package (docs/tools, bench) by its path."""
    spec = importlib.util.spec_from_file_location(Path(path).stem, ROOT / path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_matches_the_parser():
    cli = _script("docs/tools/cli_reference.py")
    assert (ROOT / "docs" / "cli.md").read_text(encoding="utf-8") == cli.markdown(), (
        "docs/cli.md is stale: run `make docs` (python docs/tools/cli_reference.py > docs/cli.md)"
    )


def test_cli_reference_lists_every_command_and_option():
    from msc.cli import build_parser

    cli = _script("docs/tools/cli_reference.py")
    text = cli.markdown()
    for name, _, sub in cli._subcommands(build_parser()):
        assert f"## msc {name}\n" in text
        for action in sub._actions:
            if action.dest == "help":
                continue
            for option in action.option_strings:
                assert f"`{option}" in text or f", {option}" in text, (name, option)


def test_performance_page_matches_the_bench_results():
    report = _script("bench/report.py")
    assert (ROOT / "docs" / "performance.md").read_text(encoding="utf-8") == report.build(), (
        "docs/performance.md is stale: run `python bench/report.py`"
    )


def test_readme_performance_section_matches_the_bench_results():
    report = _script("bench/report.py")
    assert (ROOT / "README.md").read_text(encoding="utf-8") == report.build_readme(), (
        "README.md's Performance section is stale: run `python bench/report.py`"
    )


def test_readme_performance_section_has_every_model_of_the_run():
    import json

    report = _script("bench/report.py")
    results = json.loads((ROOT / "bench" / "results" / "bench.json").read_text())
    deploy = json.loads((ROOT / "bench" / "results" / "onnx_deploy.json").read_text())
    section = report.readme_section(results, deploy)
    assert section.startswith(report.README_BEGIN) and section.endswith(report.README_END + "\n")
    for r in results["summary"]["to_onnx"]:
        assert f"| {r['model']} | {r['msc_s']:.2f} | {r['torch_onnx_s']:.2f} |" in section
    for model in deploy["models"]:
        assert f"| {model} | " in section


def test_jax_op_table_page_matches_its_results():
    import json

    cov = _script("bench/jax_op_coverage.py")
    results = json.loads((ROOT / "bench" / "results" / "jax_op_coverage.json").read_text())
    assert (ROOT / "docs" / "jax_op_coverage.md").read_text(encoding="utf-8") == cov.markdown(
        results
    ), "docs/jax_op_coverage.md is stale: run python bench/jax_op_coverage.py --markdown ..."


def test_performance_page_reports_every_target():
    import json

    report = _script("bench/report.py")
    results = json.loads((ROOT / "bench" / "results" / "bench.json").read_text())
    text = report.page(results)
    rows = report.targets(results)
    assert rows
    for target, figure, _ in rows:
        assert f"| {target} | {figure} |" in text
