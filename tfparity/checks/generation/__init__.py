"""Greedy generation, TF against PyTorch: the tokens and the cache, each step teacher-
forced and refereed, and where a decoder parts.
"""
