"""PyTorch models (the ``torch`` extra). Importing a submodule imports torch."""
