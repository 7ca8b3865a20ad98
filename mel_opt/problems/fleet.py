"""Learner populations that look like real mobile fleets, shared by the generators.

Two sources, each per learner a training time per sample and a link rate:

- the ``fleet`` presets draw them from spreads published for mobile fleets (seeded);
- ``--param trace=fedscale:PATH`` / ``trace=flash:PATH`` take them from a public trace file
  (read by :mod:`mel_opt.io.traces`), K clients drawn (seeded) from the file's.

Published spreads (the quantiles below are the inverse distribution function we draw from,
interpolated linearly in the logarithm between them):

- Compute: the AI Benchmark ranking of 333 Android phones (2009-2019 models; Ignatov et al.,
  "AI Benchmark: All About Deep Learning on Smartphones in 2019", ICCVW 2019; the list FLASH
  ships as ``models/utils/device_util/raw_ai_benchmark_list.json``), the CPU floating-point
  AI score: minimum 105, 10 % 274, 25 % 568, median 1,548, 75 % 2,154, 90 % 3,414, maximum
  4,310. A learner's speed is its score over the median (90 % / 10 % = 12.4), times the
  median phone's rate of operations (our choice, ``median_ops_per_s``, default 1.5e9: one
  core of a mid-range phone; the publication gives relative speeds only).
- Links: FLASH's per-user mean speeds (Yang et al., WWW 2021, from its trace of 136,000
  smartphone users; ``models/speed_distri.json``, 19 users), KB/s: upload 431 / 2,002 /
  2,703 / 3,286 / 5,038 / 5,850 / 6,635 and download 2,370 / 3,274 / 3,718 / 4,318 / 7,243 /
  9,091 / 17,333 at the same quantiles. Upload and download are drawn at the same quantile
  (a fast link is fast both ways: the 19 users' means have rank correlation 0.74).

Both problems have one reciprocal link rate per learner, so a learner's rate is the harmonic
mean of its upload and download speeds, 2 / (1 / up + 1 / down): the model's round trip (one
download, one upload of the same size) then takes exactly as long as with the two speeds.

Conversions from a trace: FedScale's ``computation`` c [ms per sample] is the inference latency
of FedScale's reference model, MobileNetV2 (FedScale's maintainers, SymbioticLab/FedScale issue
136: "the current compute trace is from mobile_v2", and a model of F floating-point operations
per sample costs F / F_ref of it). F_ref = :data:`REFERENCE_FLOPS_PER_SAMPLE` = 6.0e8: the 300
million multiply-adds of MobileNetV2 (width 1.0, 224 x 224 input; Sandler et al., "MobileNetV2:
Inverted Residuals and Linear Bottlenecks", CVPR 2018, Table 4), two operations each as mel_opt
counts its own models (``--param reference_flops_per_sample`` declares another). The run's model
costs F = :func:`mel_opt.mlp.forward_flops_per_sample` of its layers, and a client gives
3 c / 1000 x F / F_ref seconds per sample and training pass (FedScale's factor 3: the backward
pass costs about twice the forward). With ``median_ops_per_s`` given, a FedScale trace keeps
its clients' relative speeds instead (speed proportional to 1 / c) and the file's median client
runs at that many operations per second, as the published spread's median phone does (the two
params together are refused). Its ``communication`` [kbit/s] gives 1,024 x that in bit/s
(:data:`KBIT`: FedScale's simulator counts 1,024 bits to its kbit, and its published times
are computed so); FLASH's
mean speeds [KB/s, 1 KB = 1,024 bytes] give bytes/s by x 1,024 (FLASH has no compute: with a
FLASH trace the compute speeds are drawn from the AI Benchmark spread above). FLASH draws each
transfer from a normal law around the mean; an instance keeps the mean.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from mel_opt.errors import UsageError
from mel_opt.io.traces import read_fedscale_capacity, read_flash_speeds

#: The probabilities of the published quantile tables (minimum, deciles, quartiles, maximum).
QUANTILE_PROBS = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)
#: AI Benchmark CPU floating-point AI score of 333 Android phones at :data:`QUANTILE_PROBS`.
AI_BENCHMARK_CPU_SCORE = (105.0, 274.2, 568.0, 1548.0, 2154.0, 3413.6, 4310.0)
#: FLASH per-user mean upload speed [KB/s] at :data:`QUANTILE_PROBS`.
FLASH_UP_KBPS = (431.0, 2002.2, 2702.9, 3285.7, 5037.9, 5849.7, 6635.4)
#: FLASH per-user mean download speed [KB/s] at :data:`QUANTILE_PROBS`.
FLASH_DOWN_KBPS = (2370.2, 3273.5, 3718.3, 4317.6, 7242.7, 9091.0, 17332.7)
#: Operations per second of the median phone (our choice; param ``median_ops_per_s``).
MEDIAN_OPS_PER_S = 1.5e9
#: FedScale's cost of one training pass over a sample in inference latencies.
TRAINING_FACTOR = 3.0
#: Floating-point operations of one inference of FedScale's reference model, MobileNetV2
#: (300 M multiply-adds, Sandler et al. CVPR 2018 Table 4, x 2); param
#: ``reference_flops_per_sample``.
REFERENCE_FLOPS_PER_SAMPLE = 6.0e8
#: Bytes in FLASH's KB.
KB = 1024.0
#: Bits in FedScale's kbit: its simulator turns a model's bytes into kbit as bytes / 1024 x 8
#: (``fedscale/cloud/aggregation/aggregator.py``) and divides by ``communication``, so a
#: client's bandwidth B moves B x 1,024 / 8 bytes per second in FedScale's published runs.
KBIT = 1024.0
#: The generator params this module reads (each preset adds its own).
FLEET_PARAMS = ("trace", "trace_replace", "median_ops_per_s", "reference_flops_per_sample")


@dataclass(frozen=True)
class Population:
    """Per-learner speeds of a generated fleet.

    Attributes
    ----------
    ops_per_s : numpy.ndarray or None
        Operations per second (from the published compute spread), or None when the trace
        gives the time per sample instead.
    seconds_per_sample : numpy.ndarray or None
        Seconds of one training pass over one sample (from a FedScale trace), or None.
    link_Bps : numpy.ndarray
        Reciprocal link rate [bytes/s].
    source : str
        One sentence saying where the numbers came from (for the instance's description).
    names : tuple of str
        The learners' names: the trace's client ids (a client drawn again, with replacement,
        gets ``#2``, ``#3``... after its id), ``phone0``... for the published spreads.
    """

    ops_per_s: np.ndarray | None
    seconds_per_sample: np.ndarray | None
    link_Bps: np.ndarray
    source: str
    names: tuple[str, ...]


def quantile_draw(u: np.ndarray, values: tuple[float, ...]) -> np.ndarray:
    """Values at probabilities ``u`` of a published quantile table (:data:`QUANTILE_PROBS`),
    interpolated linearly in the logarithm (positive values; the table's units)."""
    return np.exp(np.interp(u, QUANTILE_PROBS, np.log(values)))


def harmonic_rate(up: np.ndarray, down: np.ndarray) -> np.ndarray:
    """The one reciprocal rate whose model round trip equals ``up`` then ``down``:
    2 / (1 / up + 1 / down), in the units of the inputs."""
    return 2.0 / (1.0 / np.asarray(up, dtype=float) + 1.0 / np.asarray(down, dtype=float))


def published_compute(rng: np.random.Generator, K: int, median_ops_per_s: float) -> np.ndarray:
    """Operations per second of K phones drawn from the AI Benchmark spread (module doc)."""
    score = quantile_draw(rng.uniform(0.0, 1.0, K), AI_BENCHMARK_CPU_SCORE)
    return median_ops_per_s * score / AI_BENCHMARK_CPU_SCORE[3]


def published_links(rng: np.random.Generator, K: int) -> np.ndarray:
    """Link rates [bytes/s] of K users drawn from FLASH's published speeds (module doc)."""
    u = rng.uniform(0.0, 1.0, K)  # one quantile for both directions
    return KB * harmonic_rate(quantile_draw(u, FLASH_UP_KBPS), quantile_draw(u, FLASH_DOWN_KBPS))


def population(params: dict[str, str], K: int, rng: np.random.Generator,
               model_flops: float) -> Population:
    """K learners from ``params`` (:data:`FLEET_PARAMS`): a trace when ``trace`` is given,
    else the published spreads.

    Parameters
    ----------
    params : dict of str to str
        ``trace`` (``fedscale:PATH`` or ``flash:PATH``), ``trace_replace`` (0 or 1: draw the
        trace's clients with replacement, needed when K exceeds them), ``median_ops_per_s``
        (published spread and FLASH only), ``reference_flops_per_sample`` (FedScale only).
    K : int
        Number of learners.
    rng : numpy.random.Generator
        The generator's seeded draws (compute first, then links or the trace's clients).
    model_flops : float
        Floating-point operations of one inference of the run's model over one sample
        (:func:`mel_opt.mlp.forward_flops_per_sample`): a FedScale client's latency is scaled
        by it over the reference model's (module doc).
    """
    from mel_opt.problems.base import param_value

    median = param_value(params, "median_ops_per_s", MEDIAN_OPS_PER_S)
    if not median > 0:
        raise UsageError(f"--param median_ops_per_s must be > 0, got {median:g}")
    ref = param_value(params, "reference_flops_per_sample", REFERENCE_FLOPS_PER_SAMPLE)
    if not 1e3 <= ref <= 1e15:
        raise UsageError("--param reference_flops_per_sample must lie in [1e3, 1e15] "
                         f"(FLOPs per inference of FedScale's reference model), got {ref:g}")
    replace = param_value(params, "trace_replace", 0, int)
    if replace not in (0, 1):
        raise UsageError(f"--param trace_replace must be 0 or 1, got {replace}")
    spec = params.get("trace")
    kind, sep, path = (spec or "").partition(":")
    if spec is not None and (not sep or not path or kind not in ("fedscale", "flash")):
        raise UsageError(f"--param trace expects fedscale:PATH or flash:PATH, got {spec!r}")
    if kind != "fedscale" and "reference_flops_per_sample" in params:
        raise UsageError("--param reference_flops_per_sample scales a FedScale trace's "
                         "compute; without --param trace=fedscale:PATH it does not apply")
    if spec is None:
        return Population(published_compute(rng, K, median), None, published_links(rng, K),
                          _PUBLISHED.format(median=median), _phones(K))
    if kind == "fedscale":
        if "median_ops_per_s" in params and "reference_flops_per_sample" in params:
            raise UsageError("--param median_ops_per_s and reference_flops_per_sample both "
                             "set a FedScale trace's speed scale; give one of them")
        cap = read_fedscale_capacity(path)
        pick = _pick(rng, len(cap.ids), K, bool(replace), path)
        link = cap.bandwidth_kbps[pick] * KBIT / 8.0
        names = _unique([cap.ids[i] for i in pick.tolist()])
        if "median_ops_per_s" in params:  # the trace's relative speeds, the median's given
            file_median = float(np.median(cap.compute_ms))
            return Population(median * file_median / cap.compute_ms[pick], None, link,
                              f"Learners drawn (seed as above, {_how(replace)}) from the "
                              f"{len(cap.ids)} clients of the FedScale device-capacity file "
                              f"{os.path.basename(path)}: compute speeds in the ratios of the "
                              f"clients' 'computation' latencies, the file's median client "
                              f"({file_median:g} ms) at {median:g} operations/s; " +
                              _COMMUNICATION, names)
        scale = model_flops / ref
        return Population(None, TRAINING_FACTOR * cap.compute_ms[pick] / 1000.0 * scale, link,
                          f"Learners drawn (seed as above, {_how(replace)}) from the "
                          f"{len(cap.ids)} clients of the FedScale device-capacity file "
                          f"{os.path.basename(path)}: 3 x 'computation' ms per sample and "
                          "training pass of FedScale's reference model, scaled to this "
                          f"model by its FLOPs per inference over the reference's: "
                          f"{model_flops:,.0f} / {ref:g}; " + _COMMUNICATION, names)
    speeds = read_flash_speeds(path)
    ops = published_compute(rng, K, median)
    pick = _pick(rng, len(speeds.ids), K, bool(replace), path)
    link = KB * harmonic_rate(speeds.up_mean[pick], speeds.down_mean[pick])
    names = _unique([speeds.ids[i] for i in pick.tolist()])
    return Population(ops, None, link,
                      f"Links drawn (seed as above, {_how(replace)}) from the {len(speeds.ids)} "
                      f"users of the FLASH speed file {os.path.basename(path)}: the harmonic "
                      "mean of each user's mean upload and download speed (KB/s x 1,024); "
                      + _COMPUTE.format(median=median), names)


_COMPUTE = ("compute drawn from the AI Benchmark CPU-float scores of 333 Android phones "
            "(Ignatov et al. 2019; 90 %/10 % = 12.4) scaled to a median of {median:g} "
            "operations/s (our choice).")
_PUBLISHED = ("Fleet of published spreads: " + _COMPUTE + " Links from FLASH's per-user mean "
              "speeds (Yang et al. 2021; upload median 3,286 KB/s, download 4,318 KB/s, drawn "
              "at one quantile), rate = harmonic mean of up and down.")


_COMMUNICATION = ("'communication' kbit/s both ways, 1 kbit = 1,024 bits as FedScale's "
                  "simulator counts it; learners named by their client ids.")


def _phones(K: int) -> tuple[str, ...]:
    return tuple(f"phone{k}" for k in range(K))


def _unique(ids: list[str]) -> tuple[str, ...]:
    """``ids`` as distinct names: a repeat (a draw with replacement) gets ``#2``, ``#3``...,
    past any name already taken."""
    taken = set(ids)
    seen: set[str] = set()
    out: list[str] = []
    for cid in ids:
        name, n = cid, 1
        while name in seen or (n > 1 and name in taken):
            n += 1
            name = f"{cid}#{n}"
        seen.add(name)
        out.append(name)
    return tuple(out)


def _how(replace: int) -> str:
    return "with replacement" if replace else "without replacement"


def _pick(rng: np.random.Generator, n: int, K: int, replace: bool, path: str) -> np.ndarray:
    """K seeded client indices out of ``n``; too few clients without replacement is an error."""
    if K > n and not replace:
        raise UsageError(f"{path}: {n} clients, fewer than the {K} learners asked; draw with "
                         "replacement with --param trace_replace=1")
    return np.sort(rng.choice(n, size=K, replace=replace))
