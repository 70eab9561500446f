"""Weight files: read without running anything, never through a link out of the model's
folder, never as other bytes than those the model was loaded with; a file cut while msc reads
it is one error line, not a dead process.

Before: ``msc inspect DIR/model.safetensors`` was "unknown model format" and inspecting a
generated directory ran its model.py; a saved graph's weights.safetensors symlinked outside
its folder was read silently; a weight file rewritten in place with its size and mtime put
back was read without complaint; truncating it while mapped killed msc with SIGBUS, no
message, staging left behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import msc
from msc.errors import MscError
from msc.examples import small_cnn_graph
from tests.security import ROOT, one_error, run_child


def _generated(tmp_path: Path) -> Path:
    """A generated PyTorch directory whose model.py would leave a mark if it ran."""
    import codegen.torch as cgt

    out = cgt.save(small_cnn_graph(), tmp_path / "gen")
    mark = tmp_path / "ran"
    (out / "model.py").write_text(f"open({str(mark)!r}, 'w').write('model.py ran')\n")
    return out


def test_weights_of_a_generated_directory_without_running_it(tmp_path):
    out = _generated(tmp_path)
    g = small_cnn_graph()
    for target in (out, out / "model.safetensors"):
        args = ["inspect", str(target), "--json"]
        p = run_child(*args, "--weights-only") if target.is_dir() else run_child(*args)
        assert p.returncode == 0, p.stderr
        data = json.loads(p.stdout)
        assert data["weights_only"] and data["params"] == sum(
            int(np.prod(w.type.shape)) for w in g.weights.values()
        )
        assert len(data["tensors"]) == len(g.weights)
    p = run_child("inspect", str(out), "--weights-only", "--top", "3")
    assert p.returncode == 0 and "first 3 of" in p.stdout, p.stderr
    assert not (tmp_path / "ran").exists(), "model.py ran"


@pytest.mark.parametrize("case", ["not_safetensors", "negative_dim", "short", "no_weights"])
def test_bad_weight_files_are_one_error(tmp_path, case):
    f = tmp_path / "w.safetensors"
    if case == "not_safetensors":
        f.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")
    elif case == "negative_dim":
        header = json.dumps({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})
        f.write_bytes(len(header).to_bytes(8, "little") + header.encode() + b"\0" * 8)
    elif case == "short":
        f.write_bytes(b"\x01\x02")
    else:
        f = tmp_path / "empty_dir"
        f.mkdir()
    p = run_child("inspect", str(f), "--weights-only")
    one_error(p.returncode, p.stderr)


@pytest.mark.parametrize("name", ["weights.safetensors", "graph.msc"])
def test_a_saved_graphs_files_are_never_read_through_a_link_out(tmp_path, name):
    d = tmp_path / "saved"
    msc.save(small_cnn_graph(), d)
    (tmp_path / name).write_bytes((d / name).read_bytes())
    (d / name).unlink()
    (d / name).symlink_to(tmp_path / name)
    with pytest.raises(MscError, match="link"):
        msc.load(d)
    for args in (["inspect", str(d)], ["inspect", str(d), "--weights-only"]):
        if name == "graph.msc" and "--weights-only" in args:
            continue  # the weights alone do not read graph.msc
        p = run_child(*args)
        one_error(p.returncode, p.stderr, "symbolic link out of")


def test_a_link_inside_the_folder_is_fine(tmp_path):
    d = tmp_path / "saved"
    msc.save(small_cnn_graph(), d)
    (d / "weights.safetensors").rename(d / "real.safetensors")
    (d / "weights.safetensors").symlink_to("real.safetensors")
    assert run_child("inspect", str(d)).returncode == 0


def test_a_weight_file_rewritten_in_place_is_an_error_on_use(tmp_path):
    d = tmp_path / "saved"
    msc.save(small_cnn_graph(), d)
    g = msc.load(d)
    f = d / "weights.safetensors"
    w = next(iter(g.weights.values()))
    before = np.array(w.numpy())
    st = f.stat()
    with open(f, "r+b") as fh:  # same inode, same size, other bytes
        fh.seek(w.region.offset)
        fh.write(bytes(x ^ 0xFF for x in fh.read(16)))
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the time put back
    assert f.stat().st_size == st.st_size and f.stat().st_mtime_ns == st.st_mtime_ns
    with pytest.raises(OSError, match="changed since"):
        w.numpy()
    assert before.size  # the data read before the change was the file's


_TRUNCATING = textwrap.dedent(
    """
    import sys
    import numpy as np
    from msc.ir import tensor

    orig = tensor.FileRegion.array

    def array(self):  # another program cuts the file while msc reads its mapping
        a = orig(self)
        if isinstance(a, np.memmap):
            with open(self.path, "r+b") as f:
                f.truncate(0)
            a.sum()
        return a

    tensor.FileRegion.array = array
    sys.argv = ["msc", *sys.argv[1:]]
    from msc.cli import main

    raise SystemExit(main())
    """
)


@pytest.mark.parametrize("to", ["onnx", "msc"])
def test_a_weight_file_cut_while_mapped_is_one_error_and_leaves_nothing(tmp_path, to):
    d = tmp_path / "saved"
    msc.save(small_cnn_graph(), d)
    work = tmp_path / "work"
    work.mkdir()
    out = work / ("out.onnx" if to == "onnx" else "out")
    p = subprocess.run(
        [sys.executable, "-c", _TRUNCATING, "convert", str(d), "-o", str(out), "--to", to],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=300,
    )
    one_error(p.returncode, p.stderr, "truncated or rewritten while msc read it")
    assert sorted(work.iterdir()) == [], "output or staging left behind"
