"""The experiments' plans: the parameters the CLI turns into options, light enough for
--help (no numpy)."""
