"""The C core's bindings (the only modules to import its ffi and lib), and pandas lazily."""
