"""The table of run-time helpers copied into generated modules where torch has no single call
for an op. Each family's helpers live with its emitters (codegen/torch/emitters/<family>.py)
and join the table with ``runtime_helpers``; the weight loader every saved module uses is here.

# NOTE: invariants
# - Each helper is a top-level function named ``_msc_*`` that uses only ``torch`` and ``F``
#   (torch.nn.functional) and other ``_msc_*`` helpers: its source (``inspect.getsource``) is
#   pasted into the generated module, which therefore imports nothing but torch.
# - Helpers implement the canonical op semantics documented in msc/ops exactly (ONNX ordering
#   of pads, ONNX Resize coordinate modes, ...); emitters use a direct torch call instead when
#   it computes the same thing.
# - Sizes are read from tensors at run time, so helpers work with symbolic dims.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["HELPERS"]


def _msc_load_weights(model, state):
    """Set each parameter and buffer of ``model`` to its tensor in ``state`` (state_dict key ->
    tensor) by assignment, without a copy. Tied names share one tensor; BatchNorm's counter,
    when the graph did not keep it, starts at 0; a missing or unexpected key, or a shape or
    dtype other than the module declares, is an error."""
    names = {}  # id(declared tensor) -> its keys (several for tied weights)
    for key, t in [*model.named_parameters(remove_duplicate=False),
                   *model.named_buffers(remove_duplicate=False)]:  # fmt: skip
        names.setdefault(id(t), []).append(key)
    unexpected = set(state) - {k for keys in names.values() for k in keys}
    missing, loaded = [], {}
    for keys in names.values():
        key = next((k for k in keys if k in state), keys[0])
        owner, _, leaf = key.rpartition(".")
        module = model.get_submodule(owner)
        old = module._parameters.get(leaf, module._buffers.get(leaf))
        t = state.get(key)
        if t is None and leaf == "num_batches_tracked":
            t = torch.zeros((), dtype=torch.int64)
        if t is None or t.shape != old.shape or t.dtype != old.dtype:
            missing.append(key if t is None else f"{key}: {t.dtype}{list(t.shape)}")
            continue
        param = leaf in module._parameters
        loaded[id(old)] = torch.nn.Parameter(t, old.requires_grad) if param else t
    if missing or unexpected:
        raise KeyError(f"weights do not fit the model: {missing} missing or mis-shaped, "
                       f"unexpected {sorted(unexpected)}")  # fmt: skip
    for module in model.modules():
        for table in (module._parameters, module._buffers):
            table.update({k: loaded[id(t)] for k, t in table.items() if id(t) in loaded})
    return model


def _msc_read_stored(model, keys):
    """Read the non-persistent buffers ``keys`` of ``model`` (the forward pass's constants,
    which no state_dict carries and which are too large to write as code) from the weights
    file beside this module, so ``Model()`` followed by ``load_state_dict`` computes right.
    Nothing to do when the module is built on the meta device (``load()`` sets every tensor
    after) or has no file beside it."""
    import os

    where = globals().get("__file__")
    if where is None or torch.empty(()).is_meta:
        return
    path = os.path.join(os.path.dirname(os.path.abspath(where)), "model.safetensors")
    if not os.path.exists(path):
        return
    from safetensors import safe_open

    renamed = globals().get("WEIGHT_KEYS", {})  # state_dict key -> the file's name
    with safe_open(path, "pt") as f:
        for key in keys:
            owner, _, leaf = key.rpartition(".")
            model.get_submodule(owner)._buffers[leaf] = f.get_tensor(renamed.get(key, key))


HELPERS = {
    _msc_load_weights.__name__: _msc_load_weights,
    _msc_read_stored.__name__: _msc_read_stored,
}


def runtime_helpers(*fns: Any) -> None:
    """Make the ``_msc_*`` functions of an emitter family available to generated code (their
    source is pasted into the module that uses them); a name defined twice is an error."""
    for fn in fns:
        if fn.__name__ in HELPERS:
            raise ValueError(f"torch run-time helper {fn.__name__!r} is defined twice")
        HELPERS[fn.__name__] = fn
