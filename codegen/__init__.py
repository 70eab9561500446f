"""Codegens: regenerate a model for a target framework from an msc Graph.

One package per target (``codegen.torch``, ``codegen.onnx``); each has a registry of per-op
emitters. Generated code imports only its target, never msc.
"""
