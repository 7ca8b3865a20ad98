"""Which packages the mel_opt distribution holds; the metadata lives in pyproject.toml.

The shipped example instances stay in the top-level ``instances/`` folder of the source tree
(``make run`` solves them there) and are installed as the data package
``mel_opt.example_instances``, where :mod:`mel_opt.examples` finds them. pyproject.toml can
either discover packages or list them, not discover them and add one mapped from another
folder, hence this file.
"""

from pathlib import Path

from setuptools import find_namespace_packages, setup

EXAMPLES = "mel_opt.example_instances"
# Folders of instances whose names are valid package names (dab, feel, med) would otherwise
# be seen as packages left out of the configuration (a setuptools warning per folder); they are
# listed as data packages of their own. The others (mel-async, adaptive-tau) are plain data.
FOLDERS = sorted(p.name for p in Path(__file__).parent.joinpath("instances").iterdir()
                 if p.is_dir() and p.name.isidentifier())

setup(
    # namespace discovery, as pyproject's default: a package folder may lack __init__.py
    packages=[*find_namespace_packages(include=["mel_opt", "mel_opt.*"]), EXAMPLES,
              *(f"{EXAMPLES}.{name}" for name in FOLDERS)],
    package_dir={EXAMPLES: "instances"},
    package_data={EXAMPLES: ["*/*.json"], **{f"{EXAMPLES}.{n}": ["*.json"] for n in FOLDERS}},
)
