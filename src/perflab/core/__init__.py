"""The bindings of the cffi-built C core: the only modules that import its ffi and lib."""
