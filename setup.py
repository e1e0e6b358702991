"""setuptools needs setup() to see cffi_modules; everything else is in pyproject.toml."""

from setuptools import setup

setup(cffi_modules=["csrc/build.py:ffibuilder"])
