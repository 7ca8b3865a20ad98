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

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mel_opt.io.validate import Validator, readonly_array

PROCESSORS = ("cpu", "gpu")
MIN_BATCH = 1  # the least batch of (17e)


@dataclass(frozen=True, eq=False)
class FeelInstance:
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

    name: str
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
    description: str = ""

    problem = "feel"

    @property
    def K(self) -> int:
        """Number of devices."""
        return int(self.uplink_bps.shape[0])

    @property
    def is_gpu(self) -> bool:
        return self.processor == "gpu"


def parse(doc: Mapping[str, Any], source: str | None = None) -> FeelInstance:
    """Validate a feel document (see the module docstring) and build the instance.

    Raises
    ------
    InstanceError
        Listing every problem with its JSON path: wrong types, NaN/inf, non-positive rates,
        frames or coefficients, duplicate device names, a missing processor-specific field,
        a ``global_batch`` outside [K, K B^max] (no batch split can meet (17d)-(17e)), and
        coefficients so large that the latencies overflow.
    """
    v = Validator(source)
    root = v.obj(doc, "$")
    v.finish()
    assert root is not None  # finish() raised otherwise
    proc = v.string(root, "processor", "$", choices=PROCESSORS)
    frames = v.obj(root.get("frame_s"), "frame_s") if "frame_s" in root else None
    if "frame_s" not in root:
        v.error("frame_s", "is required but missing (an object {uplink, downlink} in seconds)")
    t_up = t_dn = None
    if frames is not None:
        t_up = v.number(frames, "uplink", "frame_s", positive=True)
        t_dn = v.number(frames, "downlink", "frame_s", positive=True)
    s = v.number(root, "gradient_bits", "$", positive=True)
    xi = v.number(root, "loss_decay_coeff", "$", positive=True)
    bmax = v.number(root, "max_batch", "$", integer=True, minimum=MIN_BATCH)
    bfix = v.number(root, "global_batch", "$", default=None, integer=True, positive=True)
    cps = upd = None
    if proc == "cpu":
        cps = v.number(root, "cycles_per_sample", "$", positive=True)
        upd = v.number(root, "update_cycles", "$", nonnegative=True)
    devices = v.list(root, "devices", "$")

    names: list[str] = []
    cols: dict[str, list[float]] = {k: [] for k in (
        "cpu_hz", "uplink_bps", "downlink_bps", "t_low_s", "slope_s_per_sample",
        "batch_threshold", "update_s")}
    for i, p, dev in v.objects(devices, "devices"):
        v.unique_name(dev, p, f"device{i}", names, "device")
        row = {
            "uplink_bps": v.number(dev, "uplink_bps", p, positive=True),
            "downlink_bps": v.number(dev, "downlink_bps", p, positive=True),
        }
        if proc == "cpu":
            row["cpu_hz"] = v.number(dev, "cpu_hz", p, positive=True)
        elif proc == "gpu":
            row["t_low_s"] = v.number(dev, "t_low_s", p, positive=True)
            row["slope_s_per_sample"] = v.number(dev, "slope_s_per_sample", p, positive=True)
            row["batch_threshold"] = v.number(dev, "batch_threshold", p, integer=True,
                                              nonnegative=True)
            row["update_s"] = v.number(dev, "update_s", p, nonnegative=True)
        if all(val is not None for val in row.values()):
            for key, val in row.items():
                cols[key].append(float(val))
    v.finish()
    assert isinstance(devices, list) and proc is not None

    K = len(devices)
    if bfix is not None and not (K * MIN_BATCH <= bfix <= K * bmax):
        v.error("global_batch", f"must lie in [K, K * max_batch] = [{K}, {K * bmax}] so that "
                f"batches of 1..{bmax} samples can add up to it, got {bfix}")
    # Overflow guard: the slowest possible round must be a finite number of seconds.
    up = np.asarray(cols["uplink_bps"])
    dn = np.asarray(cols["downlink_bps"])
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        comm = K * s / np.minimum(up, dn)  # an upload on an equal slot, order of magnitude
        if proc == "cpu":
            comp = bmax * cps / np.asarray(cols["cpu_hz"]) + upd / np.asarray(cols["cpu_hz"])
        else:
            comp = (np.asarray(cols["t_low_s"]) + np.asarray(cols["slope_s_per_sample"]) * bmax
                    + np.asarray(cols["update_s"]))
        worst = float(np.max(comm + comp)) if K else 0.0
    if not math.isfinite(worst) or worst > 1e30:
        v.error("devices", "the coefficients are too large: the latency of a round overflows "
                "(check the units: seconds, bits, Hz, bit/s)")
    v.finish()

    desc = root.get("description", "")
    gpu = proc == "gpu"
    assert t_up is not None and t_dn is not None and s is not None and xi is not None
    assert bmax is not None and (gpu or (cps is not None and upd is not None))
    return FeelInstance(
        name=str(root.get("name", "instance")),
        processor=proc,
        frame_up=float(t_up),
        frame_down=float(t_dn),
        gradient_bits=float(s),
        loss_decay_coeff=float(xi),
        max_batch=int(bmax),
        global_batch=None if bfix is None else int(bfix),
        cycles_per_sample=None if cps is None else float(cps),
        update_cycles=None if upd is None else float(upd),
        device_names=tuple(names),
        cpu_hz=None if gpu else readonly_array(cols["cpu_hz"]),
        uplink_bps=readonly_array(cols["uplink_bps"]),
        downlink_bps=readonly_array(cols["downlink_bps"]),
        t_low=readonly_array(cols["t_low_s"]) if gpu else None,
        slope=readonly_array(cols["slope_s_per_sample"]) if gpu else None,
        batch_threshold=readonly_array(cols["batch_threshold"]) if gpu else None,
        update_s=readonly_array(cols["update_s"]) if gpu else None,
        description=desc if isinstance(desc, str) else "",
    )
