"""Reading, validating and writing files: JSON with JSON-path errors, atomic writes."""

from mel_opt.io.atomic import atomic_path, atomic_write
from mel_opt.io.json_io import read_json_file
from mel_opt.io.validate import Validator

__all__ = ["Validator", "atomic_path", "atomic_write", "read_json_file"]
