"""Every code example in README.md and docs/ runs, so none can go stale.

A page's examples run in order, in one fresh directory, sharing one Python namespace (a later
block may use what an earlier one made, as a reader does):

- every ```python block runs;
- a ```console block of ``$ msc ...`` lines marked ``<!-- docs: run -->`` runs each command
  in-process (``msc.cli.main``) and compares what it prints with the lines under it: a line
  ``...`` stands for any number of lines, ``...`` inside a line for any text; the exit code
  must be 0 or 1, or 2 where the expected output shows ``msc: error:``;
- a block marked ``<!-- docs: output -->`` is what the Python block before it prints (in any
  fence language: generated code shows as ```python, and is compared, not run).

A block that cannot run says so on the line above it, with its reason:
``<!-- docs: skip REASON -->``; a block that needs an optional extra:
``<!-- docs: needs MODULE -->`` (skipped, visibly, when MODULE does not import). A python or
``$ msc`` block with neither a run marker nor a reason fails the test, and so does a marker
this file does not know. ``<!-- docs: files NAME ... -->`` anywhere on a page puts the named
example files (FILES below) in its directory first.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
MARKER = re.compile(r"^<!--\s*docs:\s*(\S+)\s*(.*?)\s*-->\s*$")
SHELL_INFO = {"", "console", "shell", "sh", "bash", "text"}


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    info: str
    text: str
    marker: tuple[str, str] | None = None

    @property
    def where(self) -> str:
        page = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page
        return f"{page}:{self.line}"

    @property
    def has_msc_commands(self) -> bool:
        return any(ln.startswith("$ msc ") for ln in self.text.splitlines())


@dataclass
class Page:
    path: Path
    blocks: list[Block] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


def parse(path: Path) -> Page:
    """The fenced blocks of a page, each with the marker on the line above it (if any)."""
    page = Page(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = MARKER.match(lines[i].strip())
        if m and m.group(1) == "files":
            page.files += m.group(2).split()
        fence = re.match(r"^(\s*)(```+)\s*([\w-]*)", lines[i])
        if not fence:
            i += 1
            continue
        indent, ticks, info = fence.groups()
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(ticks):
            j += 1
        body = "\n".join(ln[len(indent) :] for ln in lines[i + 1 : j])
        above = MARKER.match(lines[i - 1].strip()) if i else None
        marker = (above.group(1), above.group(2)) if above else None
        page.blocks.append(Block(path, i + 1, info.lower(), body + "\n", marker))
        i = j + 1
    return page


# ----------------------------------------------------------------------------- example files
def _tiny_resnet(d: Path) -> None:
    from tests.analysis import exporters

    model, args = exporters.resnet()
    exporters.export(model, args, d / "resnet.pt2", "pt2")
    exporters.export(model, args, d / "resnet.onnx", "dynamo")
    changed = exporters.change(model, "layer3.0.conv2.weight")
    exporters.export(changed, args, d / "resnet_changed.onnx", "legacy")


def _tiny_bert(d: Path) -> None:
    from tests.analysis import exporters

    model, args = exporters.bert()
    exporters.export(model, args, d / "bert.pt2", "pt2")
    exporters.export(model, args, d / "bert_legacy.onnx", "legacy")


# name -> the maker that writes it (and its siblings) into a directory
FILES = {
    "resnet.pt2": _tiny_resnet,  # tests/analysis/exporters.py's TinyResNet, torch.export.save
    "resnet.onnx": _tiny_resnet,  # the same model by torch.onnx.export(dynamo=True)
    "resnet_changed.onnx": _tiny_resnet,  # layer3.0.conv2's weight scaled, legacy exporter
    "bert.pt2": _tiny_bert,  # a 2-layer BertModel (transformers, random weights)
    "bert_legacy.onnx": _tiny_bert,  # the same model by the legacy exporter
}


@pytest.fixture(scope="session")
def example_files(tmp_path_factory):
    made: dict[object, Path] = {}

    def get(name: str) -> Path:
        maker = FILES.get(name)
        assert maker is not None, f"docs: files names {name!r}, which FILES does not make"
        if maker not in made:
            d = tmp_path_factory.mktemp("example-files")
            maker(d)
            made[maker] = d
        return made[maker] / name

    return get


# ----------------------------------------------------------------------------- matching
def _pattern(expected: str) -> re.Pattern:
    parts = []
    for line in expected.rstrip("\n").splitlines():
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            body = ".*?".join(re.escape(p) for p in line.rstrip().split("..."))
            parts.append(body + r"[ \t]*\n")
    return re.compile("".join(parts))


def _matches(expected: str, actual: str) -> bool:
    actual = "\n".join(ln.rstrip() for ln in actual.rstrip("\n").splitlines()) + "\n"
    return _pattern(expected).fullmatch(actual) is not None


def _commands(block: Block) -> list[tuple[str, str]]:
    """(command line, expected output) pairs of a console block."""
    out: list[tuple[str, list[str]]] = []
    for line in block.text.rstrip("\n").splitlines():
        if line.startswith("$ "):
            out.append((line[2:], []))
        else:
            assert out, f"{block.where}: output before the first `$ ` command"
            out[-1][1].append(line)
    return [(cmd, "\n".join(exp) + "\n" if exp else "") for cmd, exp in out]


def _run_msc(command: str) -> tuple[int, str]:
    from msc.cli import main

    argv = shlex.split(command, comments=True)
    assert argv[0] == "msc", f"only msc commands run here: {command}"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        try:
            code = main(argv[1:])
        except SystemExit as e:  # argparse: --help, --version, a bad command line
            code = e.code if isinstance(e.code, int) else 2
    return code, buf.getvalue()


# ----------------------------------------------------------------------------- the checks
SKIPPED = object()  # what a python block skipped for a missing extra printed


def _run_page(page: Page, workdir: Path, example_files) -> list[str]:
    """Run every runnable block of ``page`` in ``workdir``; the blocks skipped, with why."""
    for name in page.files:
        shutil.copy(example_files(name), workdir / name)
    examples = workdir / "msc" / "examples.py"  # `msc convert msc/examples.py:TinyCNN ...`
    examples.parent.mkdir(exist_ok=True)
    shutil.copy(ROOT / "msc" / "examples.py", examples)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    skipped: list[str] = []
    printed: object = None  # what the last python block printed
    for b in page.blocks:
        verb, arg = b.marker or (None, "")
        if verb == "skip":
            continue
        if verb == "needs" and importlib.util.find_spec(arg) is None:
            skipped.append(f"{b.where} needs {arg}")
            printed = SKIPPED  # its output block, if any, is skipped with it
            continue
        if verb == "output":  # whatever its language (generated code is shown as python)
            if printed is SKIPPED:
                continue
            assert printed is not None, f"{b.where}: an output block with no python block above"
            assert _matches(b.text, printed), f"{b.where}: the example printed\n{printed}"
        elif b.info == "python":
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                # padded so a traceback names the page's own line numbers
                code = compile("\n" * b.line + b.text, str(b.page), "exec")
                exec(code, namespace)  # noqa: S102
            printed = out.getvalue()
        elif verb in ("run", "needs") and b.has_msc_commands:
            for command, expected in _commands(b):
                code, out = _run_msc(command)
                want = 2 if "msc: error:" in expected else (0, 1)
                assert code == want or (isinstance(want, tuple) and code in want), (
                    f"{b.where}: `{command}` exited {code}:\n{out}"
                )
                assert _matches(expected, out), (
                    f"{b.where}: `{command}` printed\n{out}\nwhich is not what the page shows:\n"
                    f"{expected}"
                )
    return skipped


def problems(page: Page) -> list[str]:
    """What is wrong with a page's markers: an unknown marker, a skip without a reason, an
    `$ msc` example that neither runs nor says why not."""
    out = []
    for b in page.blocks:
        verb, arg = b.marker or (None, "")
        if verb not in (None, "run", "skip", "needs", "output"):
            out.append(f"{b.where}: unknown marker {verb!r}")
        if verb == "skip" and len(arg.split()) < 3:
            out.append(f"{b.where}: a skip needs its reason (a few words)")
        if verb == "needs" and not re.fullmatch(r"[\w.]+", arg):
            out.append(f"{b.where}: `needs` takes a module name, got {arg!r}")
        if b.info in SHELL_INFO and b.has_msc_commands and verb not in ("run", "skip", "needs"):
            out.append(
                f"{b.where}: an `$ msc` example must run (<!-- docs: run -->) or say why not "
                "(<!-- docs: skip REASON -->)"
            )
        if verb == "run" and not b.has_msc_commands:
            out.append(f"{b.where}: a run marker on a block with no `$ msc` line")
    return out


@pytest.mark.parametrize("path", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_example_is_marked(path):
    """A python or ``$ msc`` block runs or says why not; every marker is one this file knows."""
    assert problems(parse(path)) == []


def test_bad_markers_are_caught(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(
        "```console\n$ msc inspect m.onnx\n```\n"
        "<!-- docs: skip -->\n```python\nx = 1\n```\n"
        "<!-- docs: sometimes -->\n```python\nx = 1\n```\n"
    )
    found = problems(parse(page))
    assert len(found) == 3, found
    assert "must run" in found[0] and "reason" in found[1] and "unknown" in found[2]


PAGES_WITH_EXAMPLES = [
    p
    for p in PAGES
    if any(b.info == "python" or (b.marker or ("",))[0] == "run" for b in parse(p).blocks)
]


@pytest.mark.parametrize(
    "path", PAGES_WITH_EXAMPLES, ids=[str(p.relative_to(ROOT)) for p in PAGES_WITH_EXAMPLES]
)
def test_examples_run(path, tmp_path, monkeypatch, example_files):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "100")
    skipped = _run_page(parse(path), tmp_path, example_files)
    if skipped:
        pytest.skip("ran the others; not run: " + "; ".join(skipped))


def test_matching_is_strict():
    """The comparison the console examples rely on fails on a changed line."""
    assert _matches("a\n...\nd 1.5\n", "a\nb\nc\nd 1.5\n")
    assert _matches("wrote ... (onnx)\n", "wrote cnn.onnx (onnx)\n")
    assert not _matches("a\nd 1.5\n", "a\nd 1.6\n")
    assert not _matches("a\n", "a\nb\n")
