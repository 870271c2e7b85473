"""Export: TF-Hub-style encoder SavedModels, in-graph preprocessing, TFLite."""
