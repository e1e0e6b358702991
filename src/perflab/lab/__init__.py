"""The experiments, one module or package each, and the registry that lists them."""
