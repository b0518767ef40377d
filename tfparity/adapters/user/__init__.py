"""A model of the user's own as the TF side: how it is called, and the maps that give
its layers and weights Hugging Face names.
"""
