"""Reading, validating and writing files: JSON with JSON-path errors, atomic writes."""

from mel_opt.io.json_io import atomic_write_text, read_json_file
from mel_opt.io.validate import Validator

__all__ = ["Validator", "atomic_write_text", "read_json_file"]
