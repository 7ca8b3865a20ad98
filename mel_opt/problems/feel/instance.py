"""feel instances: the FEEL latency model of paper 004 and its validation.

Fields (design brief, SI units):

- ``processor``: ``"cpu"`` (Section III, Eq. (9), (12)) or ``"gpu"`` (Section V, Eq. (27), (28)).
- ``frame_s`` {``uplink``, ``downlink``}: TDMA frame lengths T_f^U, T_f^D [s].
- ``gradient_bits``: s = b p, bits of one quantised gradient (local and global) [bit].
- ``loss_decay_coeff``: xi of Eq. (8), the loss decay per sqrt(sample) [loss / sqrt(sample)].
- ``max_batch``: B^max of (17e) [samples] (a whole number; the least batch is 1).
- ``global_batch`` (optional): a fixed global batch B of (17d) [samples]; absent: B is optimised.
- ``cycles_per_sample``: C, CPU cycles of back-propagation per sample [cycle] (CPU only).
- ``update_cycles``: M^C, CPU cycles of one local model update [cycle] (CPU only).
- ``devices`` [{``name``, ``cpu_hz`` f_k^C [Hz] (CPU), ``uplink_bps`` R_k^U, ``downlink_bps``
  R_k^D [bit/s]; for GPU ``t_low_s`` t_k^l [s], ``slope_s_per_sample`` c_k [s/sample],
  ``batch_threshold`` B_k^th [samples, whole], ``update_s`` t_k^{M,G} = M^G / f_k^G [s]}].

Latencies of one communication round (Eq. (9)-(15) and (27)-(29)):

    t_k^L = B_k C / f_k                                   (9)   CPU
    t_k^L = t_k^l + c_k (B_k - B_k^th)^+                  (27)  GPU
    t_k^U = s T_f^U / (tau_k^U R_k^U)                     (10)
    t_k^D = s T_f^D / (tau_k^D R_k^D)                     (11)
    t_k^M = M^C / f_k (12) CPU,   update_s (28) GPU
    T = max_k (t_k^L + t_k^U) + max_k (t_k^D + t_k^M)    (15), (29)
    efficiency E = xi sqrt(B) / T                         (8), (16)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from mel_opt.io.fields import Field, When, number
from mel_opt.io.reader import read_table
from mel_opt.io.validate import Validator, readonly_array
from mel_opt.problems.base import Instance

PROCESSORS = ("cpu", "gpu")
MIN_BATCH = 1  # the least batch of (17e)
MAX_BATCH = 10**6  # largest B^max we accept (samples of one device in one round)

_CPU = When("processor", "cpu")
_GPU = When("processor", "gpu")
#: The fields of a feel file (SI units). The ranges keep every coefficient of the latency
#: model (a_k = s T_f / R_k, C / f_k, ...) between about 1e-19 and 1e21 and positive, so the
#: closed forms (square roots, ratios, sums over the devices) stay finite in float64.
FIELDS: tuple[Field, ...] = (
    Field("processor", "string", choices=PROCESSORS, doc="cpu (Section III) or gpu (Section V)"),
    Field("frame_s", "object", missing_hint="(an object {uplink, downlink} in seconds)",
          doc="TDMA frame lengths", fields=(
              number("uplink", 1e-6, 1e3, unit="s", doc="T_f^U, uplink frame"),
              number("downlink", 1e-6, 1e3, unit="s", doc="T_f^D, downlink frame"),
          )),
    number("gradient_bits", 1, 1e12, unit="bit", doc="s = b p, bits of one quantised gradient"),
    number("loss_decay_coeff", 1e-9, 1e9, unit="loss/sqrt(sample)", doc="xi of Eq. (8)"),
    number("max_batch", MIN_BATCH, MAX_BATCH, integer=True, sign=None, unit="sample",
           doc="B^max of (17e)"),
    number("global_batch", 1, 10**12, integer=True, required=False, unit="sample",
           doc="a fixed global batch B of (17d) (absent: B is optimised)"),
    number("cycles_per_sample", 1, 1e15, unit="cycle", when=_CPU,
           doc="C, CPU cycles of back-propagation per sample (Eq. 9)"),
    number("update_cycles", 0, 1e15, unit="cycle", sign="non-negative", when=_CPU,
           doc="M^C, CPU cycles of one local model update (Eq. 12)"),
    Field("devices", "list", doc="the devices", names="device", name_default="device{i}",
          fields=(
              number("uplink_bps", 1, 1e13, unit="bit/s", doc="R_k^U, uplink rate"),
              number("downlink_bps", 1, 1e13, unit="bit/s", doc="R_k^D, downlink rate"),
              number("distance_m", 0, 1e9, unit="m", sign="non-negative", required=False,
                     default=None, doc="distance to the base station (informational: the "
                     "rates above are what the model uses; the generator derives them from it)"),
              number("cpu_hz", 1e3, 1e13, unit="Hz", when=_CPU, doc="f_k^C, CPU clock"),
              number("t_low_s", 1e-9, 1e6, unit="s", when=_GPU,
                     doc="t_k^l, latency of a data-bound batch (Eq. 27)"),
              number("slope_s_per_sample", 1e-12, 1e6, unit="s/sample", when=_GPU,
                     doc="c_k, latency per sample above the threshold (Eq. 27)"),
              number("batch_threshold", 0, 10**9, integer=True, sign="non-negative",
                     unit="sample", when=_GPU, doc="B_k^th, end of the data-bound region"),
              number("update_s", 0, 1e6, unit="s", sign="non-negative", when=_GPU,
                     doc="t_k^{M,G}, local model update latency (Eq. 28)"),
          )),
)


#: Rules of :func:`parse` beyond the field table, as (JSON path, rule): JSON Schema cannot
#: express them, so the published schema lists them and mel_opt alone checks them.
CROSS_FIELD_RULES: tuple[tuple[str, str], ...] = (
    ("global_batch", "within [K, K * max_batch] (K devices; (17d)-(17e))"),
)


@dataclass(frozen=True, eq=False, kw_only=True)
class FeelInstance(Instance):
    """A validated feel instance (arrays are read-only; nothing here changes after parsing).

    Attributes
    ----------
    name : str
    processor : str
        ``cpu`` or ``gpu``.
    frame_up, frame_down : float
        T_f^U and T_f^D [s].
    gradient_bits : float
        s [bit].
    loss_decay_coeff : float
        xi of Eq. (8).
    max_batch : int
        B^max [samples].
    global_batch : int or None
        Fixed B [samples], or None when B is a decision.
    cycles_per_sample, update_cycles : float or None
        C and M^C [cycles] (None for GPU instances).
    device_names : tuple of str
    cpu_hz : ndarray or None
        f_k^C [Hz] (None for GPU instances).
    uplink_bps, downlink_bps : ndarray
        R_k^U, R_k^D [bit/s].
    t_low, slope, batch_threshold, update_s : ndarray or None
        GPU coefficients of Eq. (27)-(28) [s, s/sample, samples, s] (None for CPU instances).
    description : str
    """

    problem: ClassVar[str] = "feel"
    processor: str
    frame_up: float
    frame_down: float
    gradient_bits: float
    loss_decay_coeff: float
    max_batch: int
    global_batch: int | None
    cycles_per_sample: float | None
    update_cycles: float | None
    device_names: tuple[str, ...]
    cpu_hz: np.ndarray | None
    uplink_bps: np.ndarray
    downlink_bps: np.ndarray
    t_low: np.ndarray | None = None
    slope: np.ndarray | None = None
    batch_threshold: np.ndarray | None = None
    update_s: np.ndarray | None = None

    @property
    def K(self) -> int:
        """Number of devices."""
        return int(self.uplink_bps.shape[0])

    @property
    def is_gpu(self) -> bool:
        return self.processor == "gpu"


def parse(doc: Mapping[str, Any], source: str | None = None) -> FeelInstance:
    """Validate a feel document against :data:`FIELDS` and build the instance.

    Raises
    ------
    InstanceError
        Listing every problem with its JSON path: wrong types, NaN/inf, values outside the
        documented ranges, duplicate device names, a missing processor-specific field and a
        ``global_batch`` outside [K, K B^max] (no batch split can meet (17d)-(17e)).
    """
    v = Validator(source)
    root = v.obj(doc, "$")
    v.finish()
    assert root is not None  # finish() raised otherwise
    f = read_table(v, root, FIELDS)
    v.finish()
    rows = f["devices"]
    K, bmax, bfix = len(rows), f["max_batch"], f["global_batch"]
    if bfix is not None and not (K * MIN_BATCH <= bfix <= K * bmax):
        v.error("global_batch", f"must lie in [K, K * max_batch] = [{K}, {K * bmax}] so that "
                f"batches of 1..{bmax} samples can add up to it, got {bfix}")
    v.finish()

    desc = root.get("description", "")
    cps, upd = f["cycles_per_sample"], f["update_cycles"]

    def column(key: str) -> np.ndarray | None:
        return readonly_array(rows.col(key)) if key in rows.columns else None

    up = column("uplink_bps")
    dn = column("downlink_bps")
    assert up is not None and dn is not None
    return FeelInstance(
        name=str(root.get("name", "instance")),
        processor=f["processor"],
        frame_up=float(f["frame_s"]["uplink"]),
        frame_down=float(f["frame_s"]["downlink"]),
        gradient_bits=float(f["gradient_bits"]),
        loss_decay_coeff=float(f["loss_decay_coeff"]),
        max_batch=int(bmax),
        global_batch=None if bfix is None else int(bfix),
        cycles_per_sample=None if cps is None else float(cps),
        update_cycles=None if upd is None else float(upd),
        device_names=tuple(rows.names),
        cpu_hz=column("cpu_hz"),
        uplink_bps=up,
        downlink_bps=dn,
        t_low=column("t_low_s"),
        slope=column("slope_s_per_sample"),
        batch_threshold=column("batch_threshold"),
        update_s=column("update_s"),
        description=desc if isinstance(desc, str) else "",
    )
