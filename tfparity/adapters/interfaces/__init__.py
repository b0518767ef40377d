"""What a side is and what its capabilities return, framework-free: the TF side and the
reference (sides), a side's weights by PyTorch name (weight_map), greedy decoding's
record and settings, gradient runs, and sub-layer tap layouts. Checks import only these.
"""
