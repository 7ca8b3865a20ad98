"""Instances for the set-up of paper 004, Section VI and Table I (preset ``ren2021``).

Given by the paper (Table I, Section VI-A..D):

- a single cell of radius 200 m, the BS at the centre, devices uniform in the cell;
- path loss 128.1 + 37.6 log10(d [km]) dB, Rayleigh small-scale fading of unit mean power;
- transmit power 28 dBm uplink and downlink, bandwidth W = 10 MHz, noise density -174 dBm/Hz;
- T_f^U = T_f^D = 10 ms; b = 32 bits per gradient element; B^max = 128;
- models DenseNet121, ResNet18 and MobileNetV2 with 8,062,504, 33,161,024 and 3,538,984
  parameters (the paper's counts), trained on CIFAR-10 (32 x 32 images);
- CPU devices: a third each at 0.7, 1.4 and 2.1 GHz (four of each for K = 12, Section VI-B);
  GPU devices: every device has an NVIDIA GeForce GTX 1080 Ti (Section VI-D).

The average rates follow Eq. (5)-(6): R = W E[log2(1 + SNR |h|^2)] with |h|^2 ~ Exp(1) and
SNR = P 10^(-PL/10) / (N_0 W) (N_0 W is the noise power over the band). The expectation has the
closed form E[ln(1 + SNR X)] = exp(1/SNR) E_1(1/SNR), evaluated here to full double precision
(series for small arguments, continued fraction otherwise).

Not given by the paper; our documented choices (the GPU numbers, each with its source, are
derived in the "GPU coefficients" section of ``mel_opt/problems/feel/README.md``):

- devices no closer than 10 m to the BS (the path-loss formula diverges at d = 0): distances
  are uniform in area on the annulus 10 m <= d <= 200 m;
- training work per sample: 3 x the forward multiply-accumulates (MACs) of the CIFAR-10 (3 x 3
  stem, 32 x 32 input) versions of the networks (forward + backward ~ 3 forward passes), about
  0.90 G (DenseNet121), 0.56 G (ResNet18) and 0.10 G (MobileNetV2) MACs per image;
- CPU: 2 floating-point operations per cycle (one fused multiply-add), so C = 3 x MACs cycles per
  sample; the model update w <- w - eta g costs M^C = 4 cycles per parameter (memory bound);
- GPU, every device a GTX 1080 Ti (Section VI-D): 3584 CUDA cores x 2 FLOP x 1.582 GHz =
  11.34 TFLOP/s peak, 40 % sustained in training; slope c = 6 x MACs / sustained FLOP/s per
  sample; data-bound threshold B^th = 32 samples (64 for the lighter MobileNetV2);
  t^l = c B^th + 10 ms of fixed per-step cost, so the linear part of (27) extends the
  saturated line; update (28): 1 ms + 12 bytes per parameter at 300 GB/s (of 484 GB/s peak);
- xi = 1e-3 loss units per sqrt(sample): it scales every efficiency alike and moves no optimum.

Two parameters move the instance away from Table I, to show where the paper's GPU ranking
appears (the ``004-fig4-5`` reproduce entry and ``benchmarks/bench_feel_methods.py`` sweep them):

- gradient compression is ``bits_per_element``: b = 32 / r for a compression ratio r (b = 1 is
  1-bit quantisation, b = 0.1 a 320x sparsified gradient); s = b p (Section II-C);
- ``compute_scale`` multiplies every local computation time: for a GPU t^l, the slope and the
  update (as if the device were that many times slower, or the model that much heavier); for a
  CPU the cycle counts C and M^C. B^th and the radio are unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from mel_opt.errors import UsageError
from mel_opt.problems.base import check_params, param_value

PRESETS = ("ren2021", "ren2021-compressed")
PRESET_DOCS = {
    "ren2021": "paper 004 Table I: 200 m cell, 10 MHz, CPU or GPU devices, 32-bit gradients",
    "ren2021-compressed": "Table I with the gradient compressed 300x (deep gradient compression)",
}
#: Gradient compression ratio of preset ``ren2021-compressed``. The paper's footnote 1 and
#: Section VI-C rest on deep gradient compression ("the communication overhead for gradient
#: transmission is much smaller than that for parameter transmission"), whose references
#: [18]-[19] report 270-600x; we take 300x, inside that range: b = 32 / 300 bits per element.
COMPRESSION_RATIO = 300.0

CELL_RADIUS_M = 200.0
MIN_DISTANCE_M = 10.0  # our choice
POWER_DBM = 28.0
BANDWIDTH_HZ = 10e6
NOISE_DBM_PER_HZ = -174.0
FRAME_S = 10e-3
BITS_PER_ELEMENT = 32
MAX_BATCH = 128
CPU_GHZ = (0.7, 1.4, 2.1)
XI = 1e-3  # our choice

# name -> (parameters [paper], forward MACs per 32x32 image [our estimate], GPU threshold)
MODELS: dict[str, tuple[int, float, int]] = {
    "densenet121": (8_062_504, 0.90e9, 32),
    "resnet18": (33_161_024, 0.56e9, 32),
    "mobilenetv2": (3_538_984, 0.10e9, 64),
}
# GTX 1080 Ti (NVIDIA's specification): 3584 CUDA cores, 1.582 GHz boost clock, one fused
# multiply-add (2 FLOP) per core per cycle, 484 GB/s memory bandwidth.
GPU_PEAK_FLOPS = 3584 * 2 * 1.582e9  # 11.34e12 FLOP/s
GPU_SUSTAINED = 0.40  # our estimate: fraction of the peak a convolutional training step sustains
GPU_FLOPS = GPU_SUSTAINED * GPU_PEAK_FLOPS
GPU_OVERHEAD_S = 10e-3  # our estimate: fixed per-step cost (kernel launches, loss, bookkeeping)
GPU_UPDATE_OVERHEAD_S = 1e-3  # our estimate: one small kernel per parameter tensor
GPU_MEMORY_BPS = 300e9  # our estimate: sustained share (~62 %) of the 484 GB/s peak
EULER_GAMMA = 0.5772156649015329


def exp_e1(x: np.ndarray) -> np.ndarray:
    """exp(x) E_1(x) for x > 0, to double precision.

    E_1 is the exponential integral. Series E_1(x) = -gamma - ln x - sum_n (-x)^n / (n n!)
    for x <= 1; the continued fraction of E_1 (modified Lentz) for x > 1.
    """
    x = np.asarray(x, dtype=float)
    out = np.empty_like(x)
    small = x <= 1.0
    xs = x[small]
    if xs.size:
        term = np.ones_like(xs)
        acc = np.zeros_like(xs)
        for n in range(1, 40):
            term = term * (-xs) / n
            acc += term / n
        out[small] = np.exp(xs) * (-EULER_GAMMA - np.log(xs) - acc)
    for i in np.flatnonzero(~small):
        xi = float(x[i])
        b = xi + 1.0
        c = 1.0 / 1e-300
        d = 1.0 / b
        h = d
        for k in range(1, 1000):
            a = -float(k * k)
            b += 2.0
            d = 1.0 / (a * d + b)
            c = b + a / c
            delta = c * d
            h *= delta
            if abs(delta - 1.0) < 1e-16:
                break
        out[i] = h
    return out


def average_rate(distance_m: np.ndarray, power_dbm: float = POWER_DBM,
                 bandwidth_hz: float = BANDWIDTH_HZ,
                 noise_dbm_per_hz: float = NOISE_DBM_PER_HZ) -> np.ndarray:
    """Average Rayleigh-fading rate of Eq. (5)-(6) [bit/s].

    R = W E[log2(1 + snr X)], X ~ Exp(1), = W exp(1/snr) E_1(1/snr) / ln 2, with the Table I
    path loss 128.1 + 37.6 log10(d [km]) dB.
    """
    d_km = np.asarray(distance_m, dtype=float) / 1000.0
    path_loss_db = 128.1 + 37.6 * np.log10(d_km)
    noise_dbm = noise_dbm_per_hz + 10.0 * math.log10(bandwidth_hz)
    snr = 10.0 ** ((power_dbm - path_loss_db - noise_dbm) / 10.0)
    return bandwidth_hz * exp_e1(1.0 / snr) / math.log(2.0)


KNOWN_PARAMS = ("processor", "model", "bits_per_element", "max_batch", "global_batch",
                "radius_m", "loss_decay_coeff", "compute_scale")


def gpu_times(model: str, compute_scale: float = 1.0) -> tuple[float, float, int, float]:
    """GPU coefficients of one device of the preset (Eq. (27)-(28)), see the module docstring.

    Parameters
    ----------
    model : str
        A key of ``MODELS``.
    compute_scale : float
        Multiplies t^l, the slope and the update (1 = a GTX 1080 Ti).

    Returns
    -------
    (t_low_s, slope_s_per_sample, batch_threshold, update_s)
        t^l [s], c [s/sample], B^th [samples], t^M [s].
    """
    n_params, macs, threshold = MODELS[model]
    slope = 6.0 * macs / GPU_FLOPS  # 2 FLOP per MAC x (forward + backward ~ 3 forwards)
    t_low = GPU_OVERHEAD_S + slope * threshold
    update = GPU_UPDATE_OVERHEAD_S + 12.0 * n_params / GPU_MEMORY_BPS
    return compute_scale * t_low, compute_scale * slope, threshold, compute_scale * update


def _name(processor: str, model: str, K: int, seed: int, bits: float, bmax: int,
          global_batch: str | None, compute_scale: float = 1.0) -> str:
    parts = [f"ren2021_{processor}_{model}"]
    if bits != BITS_PER_ELEMENT:
        parts.append(f"{bits:g}bit")
    if compute_scale != 1.0:
        parts.append(f"cs{compute_scale:g}")
    if bmax != MAX_BATCH:
        parts.append(f"bmax{bmax}")
    parts.append(f"k{K}")
    if global_batch is not None:
        parts.append(f"B{global_batch}")
    parts.append(f"s{seed}")
    return "_".join(parts)


@dataclass(frozen=True)
class _Choices:
    """The ``--param`` values of one generated instance, validated."""

    processor: str
    model: str
    bits: float
    bmax: int
    radius: float
    xi: float
    compute_scale: float


def _choices(params: dict[str, str], bits_default: float = 32.0) -> _Choices:
    """Read and check the ``--param`` overrides (defaults: Table I, with ``bits_default`` bits
    per gradient element); UsageError on bad ones."""
    processor = param_value(params, "processor", "cpu", str)
    if processor not in ("cpu", "gpu"):
        raise UsageError(f"--param processor must be cpu or gpu, got {processor!r}")
    model = param_value(params, "model", "densenet121", str)
    if model not in MODELS:
        raise UsageError(f"--param model must be one of {', '.join(MODELS)}, got {model!r}")
    bits = param_value(params, "bits_per_element", bits_default, float)
    bmax = param_value(params, "max_batch", MAX_BATCH, int)
    radius = param_value(params, "radius_m", CELL_RADIUS_M, float)
    xi = param_value(params, "loss_decay_coeff", XI, float)
    scale = param_value(params, "compute_scale", 1.0, float)
    if not bits > 0 or bmax < 1 or not radius > MIN_DISTANCE_M or not xi > 0 or not scale > 0:
        raise UsageError("--param bits_per_element must be > 0 (an average, compression "
                         "allowed), max_batch >= 1, radius_m > "
                         f"{MIN_DISTANCE_M:g}, loss_decay_coeff > 0 and compute_scale > 0")
    return _Choices(processor, model, bits, bmax, radius, xi, scale)


def _devices(doc: dict[str, Any], ch: _Choices, dist: np.ndarray,
             rate: np.ndarray) -> list[dict[str, Any]]:
    """The device entries; for CPU devices also the shared cycle counts, written into ``doc``.

    CPU: clocks 0.7 / 1.4 / 2.1 GHz in equal thirds, C = 3 x forward MACs cycles per sample,
    M^C = 4 cycles per parameter. GPU: :func:`gpu_times`. Both times ``compute_scale``.
    """
    n_params, macs, _ = MODELS[ch.model]
    K = len(dist)
    devices: list[dict[str, Any]] = []
    if ch.processor == "cpu":
        doc["cycles_per_sample"] = ch.compute_scale * 3.0 * macs
        doc["update_cycles"] = ch.compute_scale * 4.0 * n_params
        for k in range(K):
            ghz = CPU_GHZ[(3 * k) // K]
            devices.append({"name": f"dev{k}", "cpu_hz": ghz * 1e9, "distance_m": float(dist[k]),
                            "uplink_bps": float(rate[k]), "downlink_bps": float(rate[k])})
    else:
        t_low, slope, threshold, update = gpu_times(ch.model, ch.compute_scale)
        for k in range(K):
            devices.append({"name": f"dev{k}", "distance_m": float(dist[k]),
                            "uplink_bps": float(rate[k]), "downlink_bps": float(rate[k]),
                            "t_low_s": t_low, "slope_s_per_sample": slope,
                            "batch_threshold": threshold, "update_s": update})
    return devices


def _description(ch: _Choices, K: int, seed: int, global_batch: int | None) -> str:
    """The instance's ``description``: what comes from the paper and what is our choice."""
    n_params = MODELS[ch.model][0]
    return (
        f"Paper 004 (Ren, Yu, Ding), Table I and Section VI: {K} {ch.processor.upper()} devices "
        f"training {ch.model} ({n_params:,} parameters, the paper's count) with b = {ch.bits:g} "
        f"bits per gradient element, B^max = {ch.bmax}, T_f = 10 ms, 28 dBm, W = 10 MHz, "
        "N0 = -174 dBm/Hz, path loss 128.1 + 37.6 log10(d[km]) dB, Rayleigh average rate of "
        f"Eq. (5) in closed form; devices uniform in a {ch.radius:g} m cell (seed {seed}), no "
        "closer than 10 m (our choice). "
        + ("CPU clocks 0.7/1.4/2.1 GHz in equal thirds (paper). Our choices: C = 3 x forward "
           "MACs per 32x32 image (2 FLOPs per cycle), M^C = 4 cycles per parameter"
           if ch.processor == "cpu" else
           "Every device a GTX 1080 Ti (paper). Our choices: 40% of its 11.34e12 FLOP/s peak "
           "sustained, slope = 6 x forward MACs per 32x32 image / 4.54e12 s per sample, B^th = 32 "
           "(64 for MobileNetV2), t^l = slope B^th + 10 ms, update 1 ms + 12 bytes per parameter "
           "at 300 GB/s (each number's source: mel_opt/problems/feel/README.md)")
        + (f"; compute_scale = {ch.compute_scale:g} multiplies every compute time (not Table I)"
           if ch.compute_scale != 1.0 else "")
        + f", xi = {ch.xi:g} (scales efficiency only)"
        + (f"; global batch fixed at {global_batch} (our choice)"
           if global_batch is not None else "")
        + ". See mel_opt/problems/feel/generate.py."
    )


def generate(
    preset: str | None,
    *,
    learners: int | None = None,
    tasks: int | None = None,
    seed: int = 0,
    params: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Generate a feel instance following Table I (preset ``ren2021``, the default).

    Parameters
    ----------
    preset : str or None
        ``ren2021`` (None means ``ren2021``) or ``ren2021-compressed`` (the same with the
        gradient compressed :data:`COMPRESSION_RATIO` times: ``bits_per_element`` 32 / 300).
    learners : int, optional
        Number of devices K (default 12, as Section VI-B).
    tasks : int, optional
        Not used (feel has one task); rejected when given.
    seed : int
        Seed of the device positions.
    params : dict, optional
        Overrides: ``processor`` (cpu | gpu, default cpu), ``model`` (densenet121 | resnet18 |
        mobilenetv2, default densenet121), ``bits_per_element`` (32), ``max_batch`` (128),
        ``global_batch`` (absent), ``radius_m`` (200), ``loss_decay_coeff`` (1e-3),
        ``compute_scale`` (1; multiplies every local computation time). Gradient compression
        by a ratio r is ``bits_per_element`` = 32 / r.

    Returns
    -------
    dict
        The instance document (validated by the caller before it is written).
    """
    params = dict(params or {})
    if preset not in (None, *PRESETS):
        raise UsageError(f"unknown preset {preset!r} for feel; choose one of {', '.join(PRESETS)}")
    if tasks is not None:
        raise UsageError("feel has a single learning task: --tasks does not apply")
    check_params(params, KNOWN_PARAMS, "feel")
    K = 12 if learners is None else int(learners)
    compressed = preset == "ren2021-compressed"
    ch = _choices(params, BITS_PER_ELEMENT / COMPRESSION_RATIO if compressed
                  else BITS_PER_ELEMENT)

    n_params = MODELS[ch.model][0]
    rng = np.random.default_rng(seed)
    # Uniform in area on the annulus MIN_DISTANCE_M <= d <= radius.
    u = rng.uniform(0.0, 1.0, K)
    dist = np.sqrt(MIN_DISTANCE_M**2 + u * (ch.radius**2 - MIN_DISTANCE_M**2))
    rate = average_rate(dist)

    doc: dict[str, Any] = {
        "problem": "feel",
        "schema_version": 1,
        "name": _name(ch.processor, ch.model, K, seed, ch.bits, ch.bmax,
                      params.get("global_batch"), ch.compute_scale),
        "description": "",
        "processor": ch.processor,
        "frame_s": {"uplink": FRAME_S, "downlink": FRAME_S},
        "gradient_bits": float(ch.bits * n_params),
        "loss_decay_coeff": ch.xi,
        "max_batch": ch.bmax,
    }
    if "global_batch" in params:
        doc["global_batch"] = param_value(params, "global_batch", None, int)
    doc["devices"] = _devices(doc, ch, dist, rate)
    doc["description"] = _description(ch, K, seed, doc.get("global_batch"))
    if compressed:
        doc["description"] = (
            f"Preset ren2021-compressed: Table I with the gradient compressed "
            f"{BITS_PER_ELEMENT / ch.bits:.3g}x (b = {ch.bits:.4g} bits per element; the "
            "paper's footnote 1 and Sec. VI-C rely on deep gradient compression, 270-600x in "
            "its refs [18]-[19]). " + doc["description"])
    return doc
