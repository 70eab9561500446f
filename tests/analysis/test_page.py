"""The explorable HTML page of ``msc render`` and ``msc diff/verify --html``: its data (module
calls, completeness, overlays) and, in a real headless Chromium, what it draws and does."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import msc
from msc.analysis.diff import diff_graphs
from msc.analysis.graphview import diff_overlays, module_calls
from msc.analysis.page import graph_data
from msc.examples import small_cnn_graph
from tests.browser import chromium, script_errors

R = sys.modules["msc.analysis.render"]


class _Reused(nn.Module):
    """``mlp`` (two ops) called twice in a row, ``act`` called twice elsewhere."""

    def __init__(self) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.act = nn.Sequential(nn.Linear(4, 4), nn.GELU())

    def forward(self, x):
        return self.act(self.act(self.mlp(self.mlp(x))) * 2.0)


class _Block(nn.Module):
    def __init__(self, c: int, down: bool = False) -> None:
        super().__init__()
        cin = c // 2 if down else c
        self.conv1 = nn.Conv2d(cin, c, 3, 2 if down else 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU()  # used twice in one call, as torchvision's BasicBlock does
        self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.down = (
            nn.Sequential(nn.Conv2d(cin, c, 1, 2, bias=False), nn.BatchNorm2d(c)) if down else None
        )

    def forward(self, x):
        y = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
        return self.relu(y + (x if self.down is None else self.down(x)))


class _ResNet(nn.Module):
    """ResNet-18's shape at a small width."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = nn.Sequential(_Block(8), _Block(8))
        self.layer2 = nn.Sequential(_Block(16, True), _Block(16))
        self.layer3 = nn.Sequential(_Block(32, True), _Block(32))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


@pytest.fixture(scope="module")
def resnet() -> msc.Graph:
    torch.manual_seed(0)
    return msc.from_torch(_ResNet().eval(), (torch.randn(1, 3, 32, 32),))


def _shot_dir(tmp_path: Path) -> Path:
    """Screenshots go to $MSC_SCREENSHOTS when set (to look at them), else to tmp_path."""
    d = Path(os.environ.get("MSC_SCREENSHOTS") or tmp_path)
    d.mkdir(parents=True, exist_ok=True)
    return d


# ------------------------------------------------------------------------------ data
def test_one_group_per_module_call():
    g = msc.from_torch(_Reused(), (torch.randn(2, 4),))
    groups, root, owner = module_calls(g)
    paths = [gr.path for gr in groups]
    assert paths.count("mlp") == 2 and paths.count("act") == 2, paths
    # Each call holds its own two ops, in order, and the groups tile the graph.
    for gr in groups:
        assert [k for k, _ in gr.items] == ["n", "n"]
    assert sorted(i for gr in groups for _, i in gr.items) == [0, 1, 2, 3, 4, 5, 8, 9]
    assert [owner[i] for i in range(4)] == [0, 0, 1, 1]
    dot = R.to_dot(g)
    assert dot.count('label="mlp"') == 2 and dot.count('label="act"') == 2


def test_a_module_reusing_a_child_stays_one_call(resnet):
    groups, _, _ = module_calls(resnet)
    paths = [gr.path for gr in groups]
    # layer1.0 uses its ReLU twice: still one call of layer1.0, its two ReLUs are one-op calls
    # (drawn as nodes, not boxes).
    assert paths.count("layer1.0") == 1 and paths.count("layer1") == 1
    assert "layer1.0.relu" not in paths
    assert paths.count("layer2.0.down") == 1


def test_page_data_is_complete(resnet):
    g = resnet
    d = graph_data(g)
    n_in, n_ops, n_out = len(g.inputs), len(g.nodes), len(g.outputs)
    assert len(d["nodes"]) == n_in + n_ops + n_out and len(d["owner"]) == len(d["nodes"])
    # Every value input of every node is an edge from its producer; every output has an edge.
    want = sum(1 for n in g.nodes for v in n.inputs if v is not None and not hasattr(v, "role"))
    assert len(d["edges"]) == want + n_out
    ids = range(len(d["nodes"]))
    assert all(a in ids and b in ids and a < b for a, b, _, _ in d["edges"])
    # Members: each node is in exactly one place of the tree, and owner agrees.
    seen = [i for k, i in d["root"] if k == "n"]
    for x, gr in enumerate(d["groups"]):
        for k, i in gr["items"]:
            if k == "n":
                seen.append(i)
                assert d["owner"][i] == x
    assert sorted(seen) == list(ids)
    # Typed attributes and weights' statistics.
    conv = next(nd for nd in d["nodes"] if nd["op"] == "conv")
    assert ("stride", "ints", "[2, 2]") in [tuple(a) for a in conv["attrs"]]
    w = next(x for x in d["weights"] if x["name"] == "conv1.weight")
    arr = g.weights["conv1.weight"].numpy()
    assert w["type"] == "f32[8, 3, 7, 7]" and w["role"] == "parameter"
    assert np.isclose(w["mean"], arr.mean(dtype=np.float64)) and w["max"] == float(arr.max())
    assert d["collapsed"] is False  # small: opens expanded


def test_diff_overlay_marks_changed_added_removed():
    a = small_cnn_graph()
    b = small_cnn_graph()
    w = b.weights["classifier.weight"]
    w.set_data(np.asarray(w.numpy()) + 1)
    relu = next(n for n in b.nodes if n.op == "relu")
    neg = b.add_node("neg", [relu.output])
    b.nodes.remove(neg)
    b.nodes.insert(b.nodes.index(relu) + 1, neg)
    nxt = next(n for n in b.nodes if n.op == "reduce_mean")
    nxt.inputs = [neg.output, *nxt.inputs[1:]]
    r = diff_graphs(a, b)
    oa, ob = diff_overlays(r)
    lin_a = next(i for i, n in enumerate(a.nodes) if n.op == "linear")
    assert oa.items[lin_a][0] == "changed" and "values differ" in oa.items[lin_a][1]
    assert ob.items[b.nodes.index(neg)][0] == "added"
    page = R.to_html(a, overlay=oa)
    data = json.loads(
        re.search(r'id="msc-data">(.*?)</script>', page, re.S).group(1)  # type: ignore[union-attr]
    )
    g0 = data["graphs"][0]
    assert g0["overlay"]["legend"] and g0["nodes"][len(a.inputs) + lin_a]["ov"][0] == "changed"


# ------------------------------------------------------------------------------ browser
@pytest.fixture(scope="module")
def browser():
    yield from chromium()


def _open(browser, path: Path):
    browser.get(path.resolve().as_uri())
    assert browser.execute_script("return window.__mscReady === true"), script_errors(browser)
    return browser.execute_script("return window.__mscView()")


def _downward(view) -> list:
    b = view["boxes"]
    return [(s, t) for s, t in view["edges"] if b[t][1] < b[s][1] + b[s][3] - 0.5]


def test_page_in_chromium_click_search_collapse(browser, resnet, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    page = msc.render(resnet, tmp_path / "resnet.html")
    view = _open(browser, page)
    assert not script_errors(browser)
    nodes = browser.find_elements(By.CSS_SELECTOR, "g.node")
    assert len(nodes) == len(resnet.nodes) + 2  # expanded: every op, the input, the output
    # Top-down: every edge enters its target below its source; no staircase: the main chain
    # of layer1 (conv -> bn -> relu -> conv -> bn) is one column.
    assert not _downward(view), _downward(view)
    ids = {n.name: len(resnet.inputs) + i for i, n in enumerate(resnet.nodes)}
    col = [view["boxes"][f"n{ids[k]}"] for k in ("conv2d_1", "batch_norm_1", "relu_1")]
    assert max(abs((x + w / 2) - (col[0][0] + col[0][2] / 2)) for x, _, w, _ in col) < 5
    # Two calls of the blocks are two boxes; the reused ReLU is two nodes.
    labels = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "g.ghead text")]
    assert sum(t.endswith("layer1.0") for t in labels) == 1, labels
    # Click a conv: its attributes (typed), weights' shape and statistics, provenance.
    browser.find_element(By.CSS_SELECTOR, f"g.node[data-node='{ids['conv2d_1']}']").click()
    panel = browser.find_element(By.ID, "panel").text
    assert "conv" in panel and "stride" in panel and "ints" in panel
    assert "layer1.0.conv1.weight: f32[8, 8, 3, 3]" in panel and "mean" in panel
    assert "aten.conv2d" in panel and "layer1.0.conv1" in panel
    # Search highlights the matches in the graph.
    q = browser.find_element(By.ID, "q")
    q.send_keys("batch_norm")
    n_bn = sum(n.op == "batch_norm" for n in resnet.nodes)
    assert browser.find_element(By.ID, "hits").text.startswith(f"{n_bn} matches")
    assert len(browser.find_elements(By.CSS_SELECTOR, "g.node.hit")) == n_bn
    q.send_keys(Keys.ENTER)
    assert "batch_norm" in browser.find_element(By.ID, "panel").text
    # Collapse layer2 by its title: one box instead of its nodes; the hits inside mark it.
    layer2 = str([gr["path"] for gr in graph_data(resnet)["groups"]].index("layer2"))
    q.send_keys(Keys.CONTROL, "a")
    q.send_keys("layer2.0.conv1", Keys.ENTER)  # centres the view on layer2's first node
    browser.find_element(By.CSS_SELECTOR, f"g.ghead[data-group='{layer2}'] rect").click()
    after = browser.execute_script("return window.__mscView()")
    assert f"g{layer2}" in after["boxes"] and int(layer2) in after["collapsed"]
    assert len(browser.find_elements(By.CSS_SELECTOR, "g.node")) < len(nodes)
    assert browser.find_elements(By.CSS_SELECTOR, f"g.cgroup.hit[data-group='{layer2}']")
    assert not _downward(after)
    browser.find_element(By.ID, "fit").click()
    shot = _shot_dir(tmp_path) / "page_resnet.png"
    assert browser.save_screenshot(str(shot)) and shot.read_bytes()[:4] == b"\x89PNG"
    # Expand it again by clicking the collapsed box.
    browser.find_element(By.CSS_SELECTOR, f"g.cgroup[data-group='{layer2}']").click()
    assert len(browser.find_elements(By.CSS_SELECTOR, "g.node")) == len(nodes)
    assert not script_errors(browser)


def test_big_model_opens_collapsed_not_a_ribbon(browser, tmp_path):
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    cfg = transformers.BertConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=12,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
    )
    torch.manual_seed(0)
    bert = transformers.BertModel(cfg).eval()

    class Wrap(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, ids):
            return self.bert(ids, return_dict=False)[0]

    g = msc.from_torch(Wrap().eval(), (torch.randint(0, 100, (1, 8)),))
    assert len(g.nodes) > 150
    page = msc.render(g, tmp_path / "bert.html")
    view = _open(browser, page)
    assert not script_errors(browser)
    # Opens with whole levels of modules collapsed: few boxes, every layer looking alike.
    groups = graph_data(g)["groups"]
    layer = re.compile(r"bert\.encoder\.layer\.\d+")
    layers = [k for k, v in enumerate(groups) if layer.fullmatch(v["path"])]
    assert len(layers) == 12 and view["collapsed"] and len(view["boxes"]) <= 120
    shown = {x in view["collapsed"] for x in layers}
    assert len(shown) == 1, "all twelve layers drawn the same way"
    # A 12-layer BERT opens as a readable column, not a 1000 x 18000 ribbon.
    assert view["height"] < 3000 and view["width"] < 2000, (view["width"], view["height"])
    assert not _downward(view)
    shot = _shot_dir(tmp_path) / "page_bert.png"
    assert browser.save_screenshot(str(shot))
    from selenium.webdriver.common.by import By

    browser.find_element(By.ID, "expand").click()
    full = browser.execute_script("return window.__mscView()")
    assert not full["collapsed"] and not _downward(full) and not script_errors(browser)


def test_hostile_names_stay_text_in_chromium(browser, tmp_path):
    from selenium.webdriver.common.by import By

    from msc.ir import DType, Graph, Provenance, TensorType

    g = Graph('evil "graph"')
    x = g.add_input('in"put\\', TensorType(DType.FLOAT32, (2, 3)))
    bad = '</script><img src=x onerror="window.__pwned=1"><b>'
    y = g.add_node(
        "relu", [x], name=bad, provenance=Provenance("torch", "aten.relu", bad, 'blk."0"')
    ).output
    g.set_outputs([y])
    page = msc.render(g, tmp_path / "evil.html")
    _open(browser, page)
    assert not script_errors(browser)
    assert not browser.execute_script("return window.__pwned === 1")
    assert not browser.find_elements(By.CSS_SELECTOR, "img, #panel b")
    browser.find_element(By.CSS_SELECTOR, f"g.node[data-node='{len(g.inputs)}']").click()
    assert bad in browser.find_element(By.ID, "panel").text  # shown as text, exactly
