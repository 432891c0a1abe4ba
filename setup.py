"""Build script; the metadata lives in setup.cfg."""
import setuptools

setuptools.setup()
