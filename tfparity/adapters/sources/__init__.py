"""Where a model's weights come from: MODEL specs, checkpoint directories and files,
what a checkpoint holds, the weight cache, and the seeded tiny models.
"""
