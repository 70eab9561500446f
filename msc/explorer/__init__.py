"""Model Explorer adapter: ``model-explorer model.onnx --extensions=msc.explorer``.

Model Explorer (``pip install 'msc-graph-hub[explorer]'``, i.e. ai-edge-model-explorer) loads
``msc.explorer.main`` and offers the adapter for .onnx, .pt2 and .msc files and for the
``model.py`` of a generated PyTorch directory (which is Python code and runs, as with any
``msc`` command); a ``graph.msc`` inside a saved msc graph opens the whole saved graph. The
graphs are ``msc.analysis.explorer.to_explorer``'s; ``msc diff/verify --node-data DIR`` writes
node-data files to overlay on them (``--node_data_paths``).
"""
