"""The ONNX side: a ``.onnx`` file (torch.onnx.export, tf2onnx, Keras's
``export(format="onnx")``) run by ONNX Runtime and checked layer by layer.

One module per job: :mod:`.session` opens the file for ONNX Runtime and says what it
refuses, :mod:`.graph` reads the graph (marking intermediates, putting tensors back onto
layers, weights by PyTorch name), :mod:`.runner` feeds it, :mod:`.side` is the
:class:`~tfparity.adapters.interfaces.sides.TFSide`. Needs the ``onnx`` extra
(``pip install 'tfparity[onnx]'``); imported only when a ``.onnx`` path is checked.
"""
