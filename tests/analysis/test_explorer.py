"""The Model Explorer adapter (msc.explorer) and the node data of ``msc diff/verify``: the graph
JSON of every kind of model msc reads is well formed and complete; with Model Explorer
installed, its server draws one in a real headless Chromium; overlays reach the page."""

from __future__ import annotations

import importlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

import codegen.onnx
import codegen.torch
import msc
from msc.analysis.explorer import node_data, to_explorer
from msc.analysis.graphview import diff_overlays, verify_overlays
from msc.analysis.model import load_model
from msc.examples import example_module, onnx_example
from tests.browser import chromium, script_errors

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("explorer")
    m, args, _ = example_module("cnn")
    torch.export.save(torch.export.export(m, args), d / "cnn.pt2")
    onnx.save(onnx_example(), d / "foreign.onnx")
    g = load_model(d / "cnn.pt2").graph
    msc.save(g, d / "saved")
    codegen.torch.save(g, d / "generated")
    out = {
        "cnn.pt2": d / "cnn.pt2",
        "foreign.onnx": d / "foreign.onnx",
        "saved": d / "saved",
        "generated": d / "generated",
    }
    try:
        relax = importlib.import_module("codegen.relax")
        relax.save(g, d / "relax")
        out["relax"] = d / "relax"
    except ImportError:  # apache-tvm absent: the relax case skips with this reason
        pass
    return out


def _check_well_formed(data: dict, g: msc.Graph) -> dict:
    """Every node, edge and namespace of ``g`` is in Model Explorer's JSON, which is valid."""
    json.dumps(data, allow_nan=False)  # plain JSON
    main = data["graphs"][0]
    nodes = {n["id"]: n for n in main["nodes"]}
    assert len(nodes) == len(main["nodes"]) == len(g.inputs) + len(g.nodes) + len(g.outputs)
    for i, n in enumerate(g.nodes):
        me = nodes[str(i)]
        assert me["label"] == n.op
        # Namespaces follow module paths: the last component is the module (or its parent's
        # path when the module holds one op and is shown as the op itself).
        if n.provenance.module:
            ns = me["namespace"].split("/")
            assert n.provenance.module.startswith(ns[-1].split("@")[0]) or not me["namespace"]
        attrs = {a["key"]: a["value"] for a in me["attrs"]}
        assert attrs["module"] == (n.provenance.module or "-")
        for k in n.attrs:
            assert k in attrs and attrs[k].endswith(")")  # "value  (kind)"
        # Each value input is an edge from its producer's output, with its type on the edge.
        values = [
            (j, v) for j, v in enumerate(n.inputs) if v is not None and not hasattr(v, "role")
        ]
        edges = {e["targetNodeInputId"]: e for e in me["incomingEdges"]}
        assert len(edges) == len(values)
        for j, v in values:
            e = edges[str(j)]
            src = nodes[e["sourceNodeId"]]
            out = {m["id"]: m for m in src["outputsMetadata"]}[e["sourceNodeOutputId"]]
            shape = {a["key"]: a["value"] for a in out["attrs"]}["shape"]
            assert shape == msc.text.printer.format_type(v.type)
        for j, w in enumerate(n.inputs):
            if hasattr(w, "role"):
                assert msc.text.printer.format_type(w.type) in attrs[f"input {j}: @{w.name}"]
    for i, _ in enumerate(g.outputs):
        assert len(nodes[f"output_{i}"]["incomingEdges"]) == 1
    # Every namespace prefix is a group with attributes.
    spaces = {n["namespace"] for n in main["nodes"] if n["namespace"]}
    for s in spaces:
        parts = s.split("/")
        for k in range(len(parts)):
            assert "/".join(parts[: k + 1]) in main["groupNodeAttributes"]
    return nodes


@pytest.mark.parametrize("name", ["cnn.pt2", "foreign.onnx", "saved", "generated", "relax"])
def test_convert_every_kind_of_model(models, name):
    if name not in models:
        pytest.skip("apache-tvm is not installed: no codegen.relax directory to show")
    g = load_model(models[name]).graph
    data = to_explorer(g, graph_id=name)
    assert data["graphs"][0]["id"] == name
    nodes = _check_well_formed(data, g)
    # A hand-made ONNX file has no module hierarchy to show, and TVMScript carries none.
    if name not in ("foreign.onnx", "relax"):
        assert any(n["namespace"] for n in nodes.values())


def test_custom_and_quantized_ops_are_marked():
    from msc.ir import DType, Graph, TensorType
    from msc.ops.custom import custom_op

    g = Graph("marks")
    x = g.add_input("x", TensorType(DType.FLOAT32, (4,)))
    s = g.add_weight("s", np.array(0.1, np.float32))
    z = g.add_weight("z", np.array(0, np.int8))
    q = g.op("quantize", x, s, z, dtype=DType.INT8, axis=0, block_size=0, saturate=True)
    y = g.add_node(
        custom_op("com.example", "Thing"),
        [q],
        output_types=[TensorType(DType.INT8, (4,))],
    ).output
    g.set_outputs([y])
    nodes = {n["id"]: n for n in to_explorer(g)["graphs"][0]["nodes"]}
    attrs = {n["label"]: {a["key"]: a["value"] for a in n["attrs"]} for n in nodes.values()}
    kinds = {k: a.get("kind") for k, a in attrs.items()}
    assert kinds["quantize"] == "quantization" and kinds["com.example::Thing@1"] == "custom op"
    assert nodes["1"]["style"]["backgroundColor"] != nodes["0"]["style"]["backgroundColor"]


def test_node_data_from_verify_and_diff(models, tmp_path):
    src = load_model(models["cnn.pt2"]).graph
    w = src.weights["features.4.weight"]
    w.set_data(np.asarray(w.numpy()) * 1.5)
    broken = tmp_path / "broken.onnx"
    codegen.onnx.save(src, broken)
    r = msc.verify(models["cnn.pt2"], broken)
    assert not r.ok and r.node_errors
    oa, _ = verify_overlays(r)
    data = node_data(oa)
    first = [k for k, v in data["results"].items() if v["bgColor"] == "#d93025"]
    g = load_model(models["cnn.pt2"]).graph
    assert [g.nodes[int(k)].provenance.module for k in first] == ["features.4"]
    ok = [v for v in data["results"].values() if v["bgColor"] == "#c8ecc8"]
    assert ok and all(v["value"] <= 1e-4 for v in ok)
    # The CLI writes the same files, and a page with both graphs and their overlays.
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = tmp_path / "nd"
    p = subprocess.run(
        [sys.executable, "-m", "msc", "diff", str(models["cnn.pt2"]), str(broken), "-q",
         "--node-data", str(out), "--html", str(tmp_path / "diff.html")],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert p.returncode == 1, p.stderr
    a = json.loads((out / "A.json").read_text())
    changed = [k for k, v in a["results"].items() if v["value"] == "changed"]
    assert "features.4" in [g.nodes[int(k)].provenance.module for k in changed]
    assert json.loads((out / "B.json").read_text())["results"]
    page = (tmp_path / "diff.html").read_text()
    assert '"changed"' in page and "B: " in page
    oa, ob = diff_overlays(msc.diff(models["cnn.pt2"], broken))
    assert node_data(oa)["results"] == a["results"]


# ------------------------------------------------------------------------------ real package
def test_adapter_with_model_explorer(models):
    pytest.importorskip("model_explorer", reason="ai-edge-model-explorer is not installed")
    from model_explorer.utils import convert_adapter_response

    from msc.explorer.main import MscAdapter, model_source

    assert model_source(str(models["saved"] / "graph.msc")) == str(models["saved"])
    assert model_source(str(models["generated"] / "model.py")) == str(models["generated"])
    resp = convert_adapter_response(MscAdapter().convert(str(models["foreign.onnx"]), {}))
    g = load_model(models["foreign.onnx"]).graph
    # The graph_builder objects serialise to the same JSON the convert function returns.
    assert resp["graphs"][0]["nodes"][1]["id"] == "0"
    _check_well_formed(json.loads(json.dumps(resp)), g)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_model_explorer_draws_the_graph_in_chromium(models, tmp_path):
    pytest.importorskip("model_explorer", reason="ai-edge-model-explorer is not installed")
    gen = chromium()
    browser = next(gen)
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    server = subprocess.Popen(
        [sys.executable, "-c", "from model_explorer.cmdline import main; main()",
         str(models["cnn.pt2"]), "--extensions=msc.explorer", "--no_open_in_browser",
         "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=tmp_path, text=True,
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}/"
        for _ in range(120):
            try:
                urllib.request.urlopen(base, timeout=2).read()
                break
            except OSError:
                assert server.poll() is None, server.stdout.read()  # type: ignore[union-attr]
                time.sleep(0.5)
        data = {"models": [{"url": str(models["cnn.pt2"]), "adapterId": "msc"}]}
        browser.get(base + "?data=" + urllib.parse.quote(json.dumps(data)))
        g = load_model(models["cnn.pt2"]).graph
        want = f"op node count\n{len(g.nodes) + len(g.inputs) + len(g.outputs)}"
        text = ""
        for _ in range(120):
            text = browser.execute_script("return document.body.innerText")
            if want.replace("\n", "") in text.replace("\n", "").replace("\t", ""):
                break
            time.sleep(0.5)
        assert want.replace("\n", "") in text.replace("\n", "").replace("\t", ""), text[:2000]
        assert browser.execute_script("return document.querySelectorAll('canvas').length") > 0
        shot = Path(os.environ.get("MSC_SCREENSHOTS") or tmp_path) / "model_explorer.png"
        shot.parent.mkdir(parents=True, exist_ok=True)
        assert browser.save_screenshot(str(shot))
        # Model Explorer's page asks for web fonts from the internet, which this machine does
        # not reach: a failed resource, not a script error.
        errors = [
            e
            for e in script_errors(browser)
            if not ("Failed to load resource" in e and not e.startswith(base))
        ]
        assert not errors, errors
    finally:
        server.terminate()
        server.wait(timeout=30)
        for _ in gen:
            pass


def test_per_node_errors_when_the_outputs_match(models):
    from msc.analysis.verify import verify_models

    r = verify_models(load_model(models["cnn.pt2"]), load_model(models["saved"]), per_node=True)
    assert r.ok and not r.notes and r.divergence is None
    g = load_model(models["cnn.pt2"]).graph
    assert len(r.node_errors) == len(g.nodes) and all(e.ok for e in r.node_errors)
    oa, _ = verify_overlays(r)
    assert {s for s, _, _ in oa.items.values()} == {"ok"}
