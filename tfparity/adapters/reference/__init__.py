"""The reference: live PyTorch (``PTModel``), stored outputs (golden files), the PyTorch
config override, and PyTorch's generation, gradients and taps.
"""
