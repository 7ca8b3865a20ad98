"""Which packages the mel_opt distribution holds; the metadata lives in pyproject.toml.

The shipped example instances stay in the top-level ``instances/`` folder of the source tree
(``make run`` solves them there) and are installed as the data package
``mel_opt.example_instances``, where :mod:`mel_opt.examples` finds them. pyproject.toml can
either discover packages or list them, not discover them and add one mapped from another
folder, hence this file.
"""

from setuptools import find_namespace_packages, setup

EXAMPLES = "mel_opt.example_instances"

setup(
    # namespace discovery, as pyproject's default: a package folder may lack __init__.py
    packages=[*find_namespace_packages(include=["mel_opt", "mel_opt.*"]), EXAMPLES],
    package_dir={EXAMPLES: "instances"},
    package_data={EXAMPLES: ["*/*.json"]},
)
