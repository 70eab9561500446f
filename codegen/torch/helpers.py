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
    """Load ``state`` (state_dict key -> tensor) into ``model`` by assignment (no copy).

    Buffers a torch module has but the graph did not keep (BatchNorm's num_batches_tracked)
    are set to zero; any other missing or unexpected key is an error. A tensor registered
    under several names (tied weights) is loaded once and stays shared.
    """
    state = dict(state)
    names = {}  # id(tensor) -> its names, for tied tensors
    for key, t in [*model.named_parameters(remove_duplicate=False),
                   *model.named_buffers(remove_duplicate=False)]:  # fmt: skip
        names.setdefault(id(t), []).append(key)
    tied = {}  # alias -> the name whose tensor it shares
    for keys in names.values():
        first = next((k for k in keys if k in state), keys[0])
        tied.update({k: first for k in keys if k != first})
    for key in tied:
        state.pop(key, None)
    persistent = set(model.state_dict())
    for key in [k for k in state if k not in persistent]:  # constants: non-persistent buffers
        owner, _, leaf = key.rpartition(".")
        module = model.get_submodule(owner)
        if leaf in module._buffers:
            module._buffers[leaf] = state.pop(key)
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    bad = [k for k in missing if not k.endswith("num_batches_tracked") and k not in tied]
    if bad or unexpected:
        raise KeyError(f"weights do not fit the model: missing {bad}, unexpected {unexpected}")
    for key in missing:
        if key not in tied:
            owner, _, leaf = key.rpartition(".")
            model.get_submodule(owner).register_buffer(leaf, torch.zeros((), dtype=torch.int64))
    for alias, key in tied.items():  # assign=True replaced the tensor under one name only
        owner, _, leaf = key.rpartition(".")
        module = model.get_submodule(owner)
        t = module._parameters[leaf] if leaf in module._parameters else module._buffers[leaf]
        owner, _, leaf = alias.rpartition(".")
        module = model.get_submodule(owner)
        if leaf in module._parameters:
            module._parameters[leaf] = t
        else:
            module._buffers[leaf] = t
    return model


HELPERS = {_msc_load_weights.__name__: _msc_load_weights}


def runtime_helpers(*fns: Any) -> None:
    """Make the ``_msc_*`` functions of an emitter family available to generated code (their
    source is pasted into the module that uses them); a name defined twice is an error."""
    for fn in fns:
        if fn.__name__ in HELPERS:
            raise ValueError(f"torch run-time helper {fn.__name__!r} is defined twice")
        HELPERS[fn.__name__] = fn
