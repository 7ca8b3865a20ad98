"""Instances for the set-up of paper 000, Section V (and a random coefficient preset).

Given by the paper: MNIST (60,000 samples of 784 features), the DNN [784, 300, 124, 60, 10]
whose model is 8,974,080 bits, 1,123,736 floating-point operations per sample and update,
indoor 802.11 links within 50 m, about half laptop-class and half Raspberry-Pi-class nodes,
T = 7.5 s or 15 s. Not given (the paper defers to Table 1 of its reference [9]); our choices:

- one floating-point operation counted as one cycle (C_m = 1,123,736 cycles per sample);
- laptops 2.4-3.2 GHz, Raspberry Pis 1.2-1.5 GHz (Pi 3B+ / Pi 4 clocks), uniform;
- samples sent as raw 8-bit pixels: 784 x 8 = 6,272 bits per sample (param
  ``bits_per_pixel``: Eq. (1)'s P_d, for which the paper's example is "32-bit float");
- 802.11n, 20 MHz at 2.4 GHz, 20 dBm transmit power, noise -174 dBm/Hz + 7 dB noise figure,
  indoor log-distance path loss 40 + 35 log10(r / 1 m) dB, nodes uniform over a 50 m disc
  (at least 2 m away), Shannon rate W log2(1 + SNR) as in Eq. (1);
- the bounds (7f), not given either: d_l = floor(f_l d / K) and d_u = ceil(f_u d / K) with
  f_l = 0.6 and f_u = 1.25 (params ``min_samples_factor``, ``max_samples_factor``; absolute
  ``min_samples`` / ``max_samples`` win when given). The staleness levels depend on them: the
  laptops' balanced share is about 1.35 d/K and the Pis' about 0.65 d/K, so f_u = 1.25 makes the
  fast learners hit d_u and the optimum has a small positive staleness (the regime of the
  paper's Fig. 2); f_l = 0.6 keeps K = 5 at T = 7.5 s feasible (0.8 d/K is more than a
  1.2 GHz Pi can process once in 7.5 s). Wide bounds (the earlier d_l = 500, d_u = 30,000) let
  every learner take its balanced share: the optimum then has zero staleness and coincides with
  the synchronous scheme.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mel_opt.errors import UsageError
from mel_opt.mlp import forward_flops_per_sample, layers_for
from mel_opt.problems.base import check_params, param_value
from mel_opt.problems.fleet import FLEET_PARAMS, population

PRESETS = ("mohammad2020", "random", "large-tau", "fleet")
PRESET_DOCS = {
    "mohammad2020": "paper 000 Sec. V: MNIST, the DNN, half laptops, half Pis, 802.11, T = 15 s",
    "random": "coefficient form with random C2, C1, C0 per learner (scaling studies)",
    "large-tau": "coefficient form, tau in the thousands, few samples per learner (one more "
                 "sample moves tau by tens to hundreds of updates)",
    "fleet": "paper 000's MNIST task on a mobile fleet: compute and links drawn from published "
             "spreads (AI Benchmark, FLASH), or from a trace (--param trace=fedscale:PATH, "
             "flash:PATH)",
}

MODEL_BITS = 8_974_080  # Section V-A
#: The DNN [784, 300, 124, 60, 10] of Section V-A (mel_opt.mlp's ``mlp000`` on MNIST).
MODEL_LAYERS = layers_for("mlp000", 784, 10)
OPS_PER_SAMPLE = 1_123_736  # Section V-A
FEATURES = 784
TOTAL_SAMPLES = 60_000
MIN_SAMPLES_FACTOR = 0.6  # d_l = floor(f_l d / K)
MAX_SAMPLES_FACTOR = 1.25  # d_u = ceil(f_u d / K)


def _shannon_rate(rng: np.random.Generator, n: int, bandwidth: float = 20e6) -> np.ndarray:
    r = 50.0 * np.sqrt(rng.uniform(0.0, 1.0, n))
    r = np.maximum(r, 2.0)
    path_loss_db = 40.0 + 35.0 * np.log10(r)
    noise_dbm = -174.0 + 10.0 * math.log10(bandwidth) + 7.0
    snr_db = 20.0 - path_loss_db - noise_dbm
    return bandwidth * np.log2(1.0 + 10.0 ** (snr_db / 10.0))


def generate(
    preset: str | None,
    *,
    learners: int | None = None,
    tasks: int | None = None,
    seed: int = 0,
    params: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A mel-async instance document.

    Presets: ``mohammad2020`` (paper 000 Section V; params ``cycle_time_s`` (default 15),
    ``mode``, ``min_samples_factor`` (default 0.6), ``max_samples_factor`` (default 1.25),
    or absolute ``min_samples``, ``max_samples``, which win over the factors) and ``random``
    (coefficient form with spread-out learners, for tests and scaling studies; params
    ``cycle_time_s``, ``total_samples``) and ``large-tau`` (coefficient form with tau in the
    thousands; params ``cycle_time_s`` (default 10), ``samples_per_learner``, ``min_samples``,
    ``max_samples``) and ``fleet`` (:func:`_fleet`; 100 learners by default).
    """
    params = dict(params or {})
    preset = preset or "mohammad2020"
    if preset not in PRESETS:
        raise UsageError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    K = learners or 10
    rng = np.random.default_rng(seed)
    T = param_value(params, "cycle_time_s", 15.0)
    if preset == "random":
        return _random(params, K, seed, rng, T)
    if preset == "large-tau":
        return _large_tau(params, K, seed, rng, param_value(params, "cycle_time_s", 10.0))
    if preset == "fleet":
        return _fleet(params, learners or 100, seed, rng, T)
    return _mohammad2020(params, K, seed, rng, T)


def _large_tau(params: dict[str, str], K: int, seed: int, rng: np.random.Generator,
               T: float) -> dict[str, Any]:
    """Preset ``large-tau``: C2 uniform in [2e-5, 8e-5] s, C1 in [1e-4, 5e-4] s, C0 in
    [0.05, 0.3] s, T = 10 s, 40 samples per learner on average, d_l = 10, d_u = 200 (params
    ``cycle_time_s``, ``samples_per_learner``, ``min_samples``, ``max_samples``). Updates are
    cheap next to the cycle, so tau runs into the thousands and one sample more or less moves
    it by tens to hundreds: the optimal window is wide (s* = 249 at K = 1,000,000, seed 0)."""
    check_params(params, ("cycle_time_s", "samples_per_learner", "min_samples", "max_samples"),
                 "mel-async preset large-tau")
    per = param_value(params, "samples_per_learner", 40, int)
    d_l = param_value(params, "min_samples", 10, int)
    d_u = param_value(params, "max_samples", 200, int)
    if not 1 <= d_l <= per <= d_u:
        raise UsageError(f"--param min_samples = {d_l}, samples_per_learner = {per} and "
                         f"max_samples = {d_u} must satisfy 1 <= min <= per learner <= max")
    c2 = rng.uniform(2e-5, 8e-5, K)
    c1 = rng.uniform(1e-4, 5e-4, K)
    c0 = rng.uniform(0.05, 0.3, K)
    return _coefficient_doc(f"large_tau_k{K}_s{seed}",
                            f"coefficient-form instance with tau in the thousands (seed {seed})",
                            T, per * K, d_l, d_u, (c2, c1, c0))


def _coefficient_doc(name: str, description: str, T: float, d: int, d_l: int, d_u: int,
                     coeffs: tuple[np.ndarray, np.ndarray, np.ndarray]) -> dict[str, Any]:
    """An instance document in the coefficient form (C2_k, C1_k, C0_k of Eq. (5))."""
    c2, c1, c0 = coeffs
    return {
        "problem": "mel-async",
        "schema_version": 1,
        "name": name,
        "description": description,
        "cycle_time_s": T,
        "total_samples": d,
        "min_samples": d_l,
        "max_samples": d_u,
        "learners": [
            {"name": f"n{k}", "c2": float(c2[k]), "c1": float(c1[k]), "c0": float(c0[k])}
            for k in range(c2.size)
        ],
    }


def _random(params: dict[str, str], K: int, seed: int, rng: np.random.Generator,
            T: float) -> dict[str, Any]:
    """Preset ``random``: log-uniform C2, C1 and uniform C0 per learner (coefficient form)."""
    check_params(params, ("cycle_time_s", "total_samples"), "mel-async preset random")
    d = param_value(params, "total_samples", 1000 * K, int)
    c2 = 10 ** rng.uniform(-4.5, -3.0, K)
    c1 = 10 ** rng.uniform(-5.0, -3.5, K)
    c0 = rng.uniform(0.05, 0.5, K)
    return _coefficient_doc(f"random_k{K}_s{seed}",
                            f"random coefficient-form instance (seed {seed})", T, d,
                            max(1, d // (20 * K)), d, (c2, c1, c0))


def _mohammad2020(params: dict[str, str], K: int, seed: int, rng: np.random.Generator,
                  T: float) -> dict[str, Any]:
    """Preset ``mohammad2020``: the physical set-up of the module docstring."""
    check_params(params, ("cycle_time_s", "mode", "min_samples", "max_samples",
                          "min_samples_factor", "max_samples_factor", "bits_per_pixel"),
                 "mel-async preset mohammad2020")
    bits = param_value(params, "bits_per_pixel", 8, int)
    if not 1 <= bits <= 64:
        raise UsageError(f"--param bits_per_pixel must lie in 1..64, got {bits}")
    f_l, f_u = _factors(params, MIN_SAMPLES_FACTOR, MAX_SAMPLES_FACTOR)
    d_l, d_u = _bounds(params, K, f_l, f_u)
    mode = params.get("mode", "task-parallel")
    n_laptops = (K + 1) // 2
    kinds = ["laptop"] * n_laptops + ["pi"] * (K - n_laptops)
    rng.shuffle(kinds)
    cpu = np.where(np.array(kinds) == "laptop", rng.uniform(2.4e9, 3.2e9, K),
                   rng.uniform(1.2e9, 1.5e9, K))
    rate = _shannon_rate(rng, K)
    T_txt = f"{T:g}".replace(".", "p")
    bounds_txt = (f" ({f_l:g} d/K and {f_u:g} d/K)"
                  if "min_samples" not in params and "max_samples" not in params else "")
    return {
        "problem": "mel-async",
        "schema_version": 1,
        "name": f"mohammad2020_k{K}_T{T_txt}_s{seed}",
        "description": (
            "Paper 000 Section V set-up: MNIST 60,000 x 784, DNN [784,300,124,60,10] "
            "(8,974,080-bit model, 1,123,736 operations per sample-update), half laptops, "
            "half Raspberry Pis, indoor 802.11 within 50 m. Our choices where the paper is "
            f"silent: laptops 2.4-3.2 GHz, Pis 1.2-1.5 GHz, one operation per cycle, {bits}-bit "
            f"pixels ({FEATURES * bits:,} bits/sample), 802.11n 20 MHz / 20 dBm / -174 dBm/Hz "
            "+ 7 dB NF, "
            "path loss 40 + 35 log10(r) dB, Shannon rate, "
            f"d_l = {d_l}, d_u = {d_u}{bounds_txt}. "
            f"Generated with seed {seed}."
        ),
        "cycle_time_s": T,
        "total_samples": TOTAL_SAMPLES,
        "min_samples": d_l,
        "max_samples": d_u,
        "mode": mode,
        "model": {
            "cycles_per_sample": OPS_PER_SAMPLE,
            "sample_bits": FEATURES * bits,
            "model_bits": MODEL_BITS,
            "model_bits_per_sample": 0,
        },
        "learners": [
            {"name": f"{kinds[k]}{k}", "cpu_hz": round(float(cpu[k]), -6),
             "rate_bps": round(float(rate[k]), -3)}
            for k in range(K)
        ],
    }


def _factors(params: dict[str, str], f_l: float, f_u: float) -> tuple[float, float]:
    """The bound factors f_l, f_u of (7f) from ``params`` (defaults given), checked."""
    f_l = param_value(params, "min_samples_factor", f_l)
    f_u = param_value(params, "max_samples_factor", f_u)
    if not 0 < f_l <= 1 <= f_u:
        raise UsageError(f"--param min_samples_factor = {f_l:g} and max_samples_factor = "
                         f"{f_u:g} must satisfy 0 < min <= 1 <= max")
    return f_l, f_u


def _bounds(params: dict[str, str], K: int, f_l: float, f_u: float) -> tuple[int, int]:
    """d_l = floor(f_l d / K) and d_u = ceil(f_u d / K), or the absolute params."""
    d_l = param_value(params, "min_samples", max(1, math.floor(f_l * TOTAL_SAMPLES / K)), int)
    d_u = param_value(params, "max_samples", math.ceil(f_u * TOTAL_SAMPLES / K), int)
    return d_l, d_u


#: The fleet's lower bound factor: its slowest phones are about 15 x slower than the median,
#: so d_l must leave them room (0.6 d/K would not fit the cycle for them).
FLEET_MIN_SAMPLES_FACTOR = 0.1


def _fleet(params: dict[str, str], K: int, seed: int, rng: np.random.Generator,
           T: float) -> dict[str, Any]:
    """Preset ``fleet``: paper 000's task (MNIST, the DNN, 8-bit pixels sent) on K phones.

    Compute and links come from :func:`mel_opt.problems.fleet.population`: drawn from the
    published spreads (AI Benchmark CPU scores, FLASH's user speeds), or from a trace file
    (``--param trace=fedscale:PATH`` or ``flash:PATH``, ``trace_replace``). Conversions to the
    physical form of Eq. (2)-(4), one operation counted as one cycle as in ``mohammad2020``:
    ``cpu_hz`` = operations per second, or C_m / s where a FedScale trace gives s seconds per
    sample and update (so C2_k = s exactly; s is the trace's latency scaled from FedScale's
    reference model to the DNN's 560,880 FLOPs per inference, :mod:`mel_opt.problems.fleet`);
    ``rate_bps`` = 8 x the link rate in bytes/s. Params as ``mohammad2020`` (``cycle_time_s``
    15, ``mode``, bounds; ``min_samples_factor`` defaults to 0.1 here), ``median_ops_per_s``
    (default 1.5e9) and ``reference_flops_per_sample`` (default 6e8, FedScale only).
    """
    check_params(params, ("cycle_time_s", "mode", "min_samples", "max_samples",
                          "min_samples_factor", "max_samples_factor", *FLEET_PARAMS),
                 "mel-async preset fleet")
    f_l, f_u = _factors(params, FLEET_MIN_SAMPLES_FACTOR, MAX_SAMPLES_FACTOR)
    d_l, d_u = _bounds(params, K, f_l, f_u)
    pop = population(params, K, rng, forward_flops_per_sample(MODEL_LAYERS))
    if pop.ops_per_s is not None:
        cpu = pop.ops_per_s
    else:
        assert pop.seconds_per_sample is not None
        cpu = OPS_PER_SAMPLE / pop.seconds_per_sample
    rate = 8.0 * pop.link_Bps
    T_txt = f"{T:g}".replace(".", "p")
    source = "trace" if "trace" in params else "published"
    return {
        "problem": "mel-async",
        "schema_version": 1,
        "name": f"fleet_{source}_k{K}_T{T_txt}_s{seed}",
        "description": (
            "Paper 000's task (MNIST 60,000 x 784, DNN [784,300,124,60,10]: 8,974,080-bit "
            "model, 1,123,736 operations per sample-update counted as cycles, 8-bit pixels "
            f"sent) on a mobile fleet. {pop.source} cpu_hz = operations/s, rate_bps = 8 x "
            f"bytes/s. d_l = {d_l}, d_u = {d_u}. Generated with seed {seed}."
        ),
        "cycle_time_s": T,
        "total_samples": TOTAL_SAMPLES,
        "min_samples": d_l,
        "max_samples": d_u,
        "mode": params.get("mode", "task-parallel"),
        "model": {
            "cycles_per_sample": OPS_PER_SAMPLE,
            "sample_bits": FEATURES * 8,
            "model_bits": MODEL_BITS,
            "model_bits_per_sample": 0,
        },
        "learners": [
            {"name": pop.names[k], "cpu_hz": float(cpu[k]), "rate_bps": float(rate[k])}
            for k in range(K)
        ],
    }
