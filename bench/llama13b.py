"""Beyond RAM at real size: a 13B-parameter fp16 Llama-shaped model (about 26 GB, more than
this machine's memory) from ONNX with external data to PyTorch source + safetensors, back to
ONNX, and to a saved msc graph, with the time and peak RSS of each.

    python bench/llama13b.py [--dir DIR] [--json FILE] [--keep] [--full-check]
    python bench/llama13b.py --tiny       # the same pipeline on a ~20 MB model (a smoke test)

The model has Llama-13B's weights (vocab 32000, hidden 5120, 40 layers of 40-head attention
and a 13824-wide SwiGLU MLP, RMSNorm, untied head) in fp16, and a graph that uses every one
of them with Llama's op shapes: RMSNorm, q/k/v/o projections, scaled dot-product attention
(no rotary embedding and no causal mask: they add no weights and no conversion work), SiLU-
gated MLP, residual adds. The random weights are written to the external-data file in
64 MiB pieces, never whole in memory. Each conversion runs in a fresh process (see
bench/beyond_ram.py ``--convert``) that reports its peak RSS and peak anonymous memory above
the RSS before the call; every output's weights are then compared with the source's bytes
(the first and last MiB of each tensor; all of them with --full-check).

# NOTE: invariants
# - Free disk space is checked first: the source plus one output at a time, plus 10%. Each
#   output is removed once measured, and the directory at the end unless --keep.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

CHUNK = 1 << 26
MIB = 1 << 20

LLAMA_13B = {"vocab": 32000, "hidden": 5120, "layers": 40, "heads": 40, "mlp": 13824}
TINY = {"vocab": 512, "hidden": 256, "layers": 2, "heads": 4, "mlp": 688}


def weight_shapes(c: dict) -> list[tuple[str, tuple[int, ...]]]:
    """Every weight as (name, shape), in file order; projections stored [in, out] (MatMul)."""
    h, m = c["hidden"], c["mlp"]
    out: list[tuple[str, tuple[int, ...]]] = [("model.embed_tokens.weight", (c["vocab"], h))]
    for i in range(c["layers"]):
        p = f"model.layers.{i}"
        out += [(f"{p}.input_layernorm.weight", (h,))]
        out += [(f"{p}.self_attn.{k}_proj.weight", (h, h)) for k in "qkvo"]
        out += [(f"{p}.post_attention_layernorm.weight", (h,))]
        out += [(f"{p}.mlp.gate_proj.weight", (h, m)), (f"{p}.mlp.up_proj.weight", (h, m))]
        out += [(f"{p}.mlp.down_proj.weight", (m, h))]
    out += [("model.norm.weight", (h,)), ("lm_head.weight", (h, c["vocab"]))]
    return out


def write_model(d: Path, c: dict) -> tuple[Path, int]:
    """``d/llama.onnx`` + ``d/llama.onnx.data`` (fp16, written piecewise); returns the path and
    the weight bytes."""
    import onnx
    from onnx import TensorProto, helper

    rng = np.random.default_rng(0)
    block = ((rng.random(CHUNK // 2, dtype=np.float32) - 0.5) * 0.04).astype(np.float16)
    data = d / "llama.onnx.data"
    inits, offset = [], 0
    with open(data, "wb") as f:
        for k, (name, shape) in enumerate(weight_shapes(c)):
            n = int(np.prod(shape))
            if len(shape) == 1:  # norms: ones, as trained models have them near
                f.write(np.ones(n, np.float16).tobytes())
            else:
                left, turn = n, k
                while left:  # a rotated random block: distinct tensors, no 26 GB in memory
                    take = min(left, block.size)
                    f.write(np.roll(block, turn * 7919)[:take].tobytes())
                    left -= take
                    turn += 1
            t = TensorProto()
            t.name, t.data_type = name, TensorProto.FLOAT16
            t.dims.extend(shape)
            t.data_location = TensorProto.EXTERNAL
            for key, v in (
                ("location", data.name),
                ("offset", str(offset)),
                ("length", str(2 * n)),
            ):
                e = t.external_data.add()
                e.key, e.value = key, v
            offset += 2 * n
            inits.append(t)

    h, heads = c["hidden"], c["heads"]
    hd = h // heads
    nodes: list = []
    consts = [
        helper.make_tensor("eps", TensorProto.FLOAT16, [], [1e-5]),
        helper.make_tensor("one", TensorProto.FLOAT16, [], [1.0]),
        helper.make_tensor("scale", TensorProto.FLOAT16, [], [hd**-0.5]),
        helper.make_tensor("heads_shape", TensorProto.INT64, [4], [1, -1, heads, hd]),
        helper.make_tensor("flat_shape", TensorProto.INT64, [3], [1, -1, h]),
    ]

    def op(kind: str, ins: list[str], out: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(kind, ins, [out], name=out, **attrs))
        return out

    def rms(x: str, w: str, p: str) -> str:
        sq = op("Mul", [x, x], f"{p}.sq")
        mean = op("ReduceMean", [sq], f"{p}.mean", axes=[-1], keepdims=1)
        root = op("Sqrt", [op("Add", [mean, "eps"], f"{p}.var")], f"{p}.root")
        return op("Mul", [op("Div", [x, root], f"{p}.normed"), w], f"{p}.out")

    def heads_of(x: str, p: str) -> str:
        r = op("Reshape", [x, "heads_shape"], f"{p}.split")
        return op("Transpose", [r], f"{p}.heads", perm=[0, 2, 1, 3])

    x = op("Gather", ["model.embed_tokens.weight", "input_ids"], "embed")
    for i in range(c["layers"]):
        p = f"model.layers.{i}"
        n1 = rms(x, f"{p}.input_layernorm.weight", f"{p}.norm1")
        q, k, v = (
            heads_of(op("MatMul", [n1, f"{p}.self_attn.{t}_proj.weight"], f"{p}.{t}"), f"{p}.{t}")
            for t in "qkv"
        )
        kt = op("Transpose", [k], f"{p}.kt", perm=[0, 1, 3, 2])
        s = op("Mul", [op("MatMul", [q, kt], f"{p}.qk"), "scale"], f"{p}.scores")
        a = op("MatMul", [op("Softmax", [s], f"{p}.probs", axis=-1), v], f"{p}.attn")
        a = op("Transpose", [a], f"{p}.attn_t", perm=[0, 2, 1, 3])
        a = op("Reshape", [a, "flat_shape"], f"{p}.attn_flat")
        o = op("MatMul", [a, f"{p}.self_attn.o_proj.weight"], f"{p}.o")
        x = op("Add", [x, o], f"{p}.res1")
        n2 = rms(x, f"{p}.post_attention_layernorm.weight", f"{p}.norm2")
        g = op("MatMul", [n2, f"{p}.mlp.gate_proj.weight"], f"{p}.gate")
        silu = op("Mul", [g, op("Sigmoid", [g], f"{p}.gate_sig")], f"{p}.silu")
        up = op("MatMul", [n2, f"{p}.mlp.up_proj.weight"], f"{p}.up")
        down = op(
            "MatMul", [op("Mul", [silu, up], f"{p}.glu"), f"{p}.mlp.down_proj.weight"], f"{p}.down"
        )
        x = op("Add", [x, down], f"{p}.res2")
    x = rms(x, "model.norm.weight", "model.norm")
    op("MatMul", [x, "lm_head.weight"], "logits")
    graph = helper.make_graph(
        nodes,
        "llama_13b_shaped",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "seq"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT16, [1, "seq", c["vocab"]])],
        inits + consts,
    )
    path = d / "llama.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path, offset


def output_regions(kind: str, out: Path) -> dict[str, tuple[str, int, int]]:
    """name -> (file, offset, length) of each weight a conversion wrote."""
    from msc.io import safetensors as st

    if kind == "onnx":
        import msc

        g = msc.from_onnx(next(out.glob("*.onnx")))
        return {
            n: (w.region.path, w.region.offset, w.region.length)
            for n, w in g.weights.items()
            if w.region is not None
        }
    f = out / ("model.safetensors" if kind == "torch" else "weights.safetensors")
    header, start = st.read_header(f)
    return {
        n: (str(f), start + s["data_offsets"][0], s["data_offsets"][1] - s["data_offsets"][0])
        for n, s in header.items()
        if n != "__metadata__"
    }


def same_bytes(src: Path, c: dict, got: dict, full: bool) -> tuple[bool, int]:
    """Each source weight's bytes equal the output's (first and last MiB, or all); returns
    (equal, tensors found). Output names may be sanitized: matched by order and size when a
    name is missing."""
    data = np.memmap(src.parent / "llama.onnx.data", dtype=np.uint8, mode="r")
    off, equal, found = 0, True, 0
    for name, shape in weight_shapes(c):
        n = 2 * int(np.prod(shape))
        if name in got:
            path, start, length = got[name]
            found += 1
            out = np.memmap(path, dtype=np.uint8, mode="r")
            spans = [(0, n)] if full else [(0, min(n, MIB)), (max(0, n - MIB), n)]
            equal &= length == n
            for lo, hi in spans:
                for p in range(lo, hi, CHUNK):
                    q = min(hi, p + CHUNK)
                    equal &= bool(
                        np.array_equal(data[off + p : off + q], out[start + p : start + q])
                    )
            del out
        off += n
    return equal, found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=None, help="work directory (default: a new temporary one)")
    ap.add_argument("--json", default="bench/results/llama13b.json")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--tiny", action="store_true", help="a ~20 MB model: a smoke test")
    ap.add_argument("--full-check", action="store_true", help="compare every weight byte")
    a = ap.parse_args()
    c = TINY if a.tiny else LLAMA_13B
    params = sum(int(np.prod(s)) for _, s in weight_shapes(c))
    nbytes = 2 * params
    d = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="msc-llama13b-"))
    d.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {"config": c, "params": params, "weight_bytes": nbytes}
    print(f"{params / 1e9:.2f}B parameters, {nbytes / 2**30:.1f} GiB fp16, in {d}", flush=True)
    try:
        free = shutil.disk_usage(d).free
        need = 2.2 * nbytes  # the source and one output at a time, plus 10%
        if free < need:
            raise OSError(f"{free / 2**30:.1f} GiB free in {d}, need {need / 2**30:.1f}")
        t = time.perf_counter()
        src, _ = write_model(d, c)
        res["write_s"] = time.perf_counter() - t
        print(f"  wrote the ONNX model in {res['write_s']:.0f} s", flush=True)
        for kind in ("torch", "onnx", "msc"):
            out = d / kind
            conv_json = d / f"convert-{kind}.json"
            cmd = [sys.executable, str(HERE / "beyond_ram.py"), "--convert", kind, str(src)]
            proc = subprocess.run(
                [*cmd, str(out), "--json", str(conv_json)], capture_output=True, text=True
            )
            if proc.returncode:
                raise RuntimeError(f"{kind} conversion failed: {proc.stderr.strip()[-1500:]}")
            r = json.loads(conv_json.read_text())
            r["weights_equal"], r["weights_found"] = same_bytes(
                src, c, output_regions(kind, out), a.full_check
            )
            res[f"to_{kind}"] = r
            print(
                f"  to {kind}: {r['seconds']:.0f} s, peak RSS +{r['peak_rss'] / 2**20:.0f} MB, "
                f"peak anon +{r['peak_anon'] / 2**20:.0f} MB, weights "
                f"{'equal' if r['weights_equal'] else 'DIFFER'} ({r['weights_found']} by name)",
                flush=True,
            )
            shutil.rmtree(out, ignore_errors=True)
    except Exception as e:  # noqa: BLE001
        msg = str(e).strip()
        res["error"] = {"type": type(e).__name__, "message": msg, "summary": msg[-300:]}
        print(f"  FAILED: {res['error']['summary']}", flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(d, ignore_errors=True)
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps(res, indent=1) + "\n")
    sys.exit(1 if "error" in res else 0)


if __name__ == "__main__":
    main()
