"""Reading a batch manifest (JSON, or YAML with PyYAML) as untrusted input: bounded in size,
nesting and alias expansion, every problem one MscError naming the file; and where its
entries may write (inside the batch's output directory, nowhere else).

# NOTE: invariants
# - At most MAX_BYTES are read; the text must be UTF-8.
# - YAML is composed into its node graph first (aliases are shared nodes there, nothing is
#   expanded) and the size of the document with every alias expanded is counted, memoized
#   per node, before any Python object is built: a "billion laughs" document (a few hundred
#   bytes whose aliases expand to gigabytes) is refused in milliseconds. A document whose
#   aliases form a cycle is refused too.
# - Nesting deeper than the decoders' recursion is an error, not a RecursionError.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from msc.errors import MscError

__all__ = ["read_manifest", "output_problem", "check_outputs", "MAX_BYTES"]

# A manifest lists models: a few hundred bytes each. Also the bound on a YAML document's size
# with its aliases expanded (each scalar counts its characters, each collection one).
MAX_BYTES = 16 << 20


def read_manifest(path: Path) -> Any:
    """The manifest at ``path`` as plain data (dicts, lists, strings, numbers)."""
    with open(path, "rb") as f:
        raw = f.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise MscError(f"{path}: larger than {MAX_BYTES >> 20} MiB; not a manifest")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise MscError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        return _yaml(path, text)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise MscError(f"{path}: not valid JSON: line {e.lineno}: {e.msg}") from None
    except RecursionError:
        raise MscError(f"{path}: nested too deeply to be a manifest") from None


def _yaml(path: Path, text: str) -> Any:
    try:
        import yaml
    except ImportError:
        raise MscError(f"{path}: a YAML manifest needs PyYAML (pip install pyyaml)") from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = _expanded_size(node)
        if size > MAX_BYTES:
            raise MscError(
                f"{path}: its aliases expand to more than {MAX_BYTES >> 20} MiB; "
                "not a manifest (a YAML alias bomb?)"
            )
        return loader.construct_document(node)
    except yaml.YAMLError as e:
        raise MscError(f"{path}: not valid YAML: {' '.join(str(e).split())}") from None
    except RecursionError:
        raise MscError(f"{path}: nested too deeply to be a manifest") from None
    finally:
        loader.dispose()


def _expanded_size(root: Any) -> int:
    """The size of the YAML node graph ``root`` with aliases expanded: characters of scalars
    plus one per collection, computed once per node (iteratively: no recursion limit). Past
    the bound it stops counting; a cycle of aliases counts as unbounded."""
    import yaml

    sizes: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        if isinstance(node, yaml.ScalarNode):
            sizes[key] = 1 + len(node.value)
            continue
        children = (
            [x for pair in node.value for x in pair]
            if isinstance(node, yaml.MappingNode)
            else list(node.value)
        )
        if done:
            open_.discard(key)
            sizes[key] = min(MAX_BYTES + 1, 1 + sum(sizes[id(c)] for c in children))
            continue
        if key in open_:
            return MAX_BYTES + 1  # an alias inside the node it names
        open_.add(key)
        stack.append((node, True))
        for c in children:
            if id(c) in open_:
                return MAX_BYTES + 1
            if id(c) not in sizes:
                stack.append((c, False))
    return sizes[id(root)]


def output_problem(out: Path, rel: Any, report: str) -> str | None:
    """Why an entry's output ``rel`` (relative to the batch's output directory ``out``) may not
    be written, or None: it must be a relative path that stays inside ``out``, by its ``..``
    parts or through a symbolic link, and is neither ``out`` itself nor its report."""
    if not isinstance(rel, str) or not rel.strip() or "\0" in rel:
        return f"output {rel!r} is not a relative path"
    p = PurePosixPath(rel)
    if p.is_absolute() or PureWindowsPath(rel).anchor:
        return f"output {rel!r} is absolute; outputs go under the batch's output directory"
    if ".." in p.parts or ".." in PureWindowsPath(rel).parts:
        return f"output {rel!r} leaves the batch's output directory ('..')"
    if not p.parts:
        return f"output {rel!r} is the batch's output directory itself"
    if p.parts == (report,):
        return f"output {rel!r} is the batch's report"
    root, dest = out.resolve(), (out / p).resolve()
    if root not in dest.parents:
        return f"output {rel!r} leads out of the batch's output directory (a symbolic link)"
    return None


def check_outputs(outputs: list[tuple[str, str, str]], reads: list[tuple[str, str]]) -> list[str]:
    """Before any work: the problems of the entries' outputs ((entry, path, target)): one that
    is, or holds, a model some entry reads ((entry, path) pairs), or a file or directory
    there that msc did not write."""
    from msc.io import files

    held: dict[Path, str] = {}  # each input and every directory above it -> the entry
    for name, src in reads:
        p = Path(src).resolve()
        for q in (p, *p.parents):
            held.setdefault(q, name)
    problems = []
    for name, out, target in outputs:
        dest = Path(out).resolve()
        if dest in held:
            problems.append(f"{name}: its output {out} would replace what {held[dest]} reads")
            continue
        kind, what = ("file", "onnx") if target == "onnx" else ("dir", None)
        try:
            files.check_output(out, kind, what)
        except MscError as e:
            problems.append(f"{name}: {e}")
    return problems
