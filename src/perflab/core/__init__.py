"""The C core's bindings (the only modules to import its ffi and lib), pandas lazily, and the
file primitives every layer writes and reads through."""
