"""Download-time prediction error of SB (thesis Fig. 3.3) over loopback HTTP on this machine.

A stdlib HTTP server on 127.0.0.1 (ephemeral port, stopped at the end) serves TARGET (60)
generated 500-sample shards. For each trial the real time to download TARGET shards is
measured, and SB predicts it from the timed download of n = 2, 4, 6, 8, 10 shards
(b_k = n / T_d, prediction TARGET / b_k), in a seeded random order. Loopback is not a
network: this exercises the measurement (connection set-up per shard included), it cannot
reproduce WiFi or Ethernet figures.

Thesis (60 shards, 45 trials): Ethernet 15.9 / 13.6 / 12.9 / 11.7 / 10.4 %,
WiFi 32 % at 2 shards down to 8 % at 10.

    python benchmarks/bench_dab_download_error.py [--trials 20] [--target 60]
"""

from __future__ import annotations

import argparse
import http.server
import statistics
import threading

import numpy as np
from rich.console import Console
from rich.table import Table

from mel_opt.benchmarking import encode_shard, make_shards, time_download

THESIS_ETHERNET = {2: 15.9, 4: 13.6, 6: 12.9, 8: 11.7, 10: 10.4}


def serve(blobs: list[bytes]) -> tuple[http.server.ThreadingHTTPServer, threading.Thread, str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (stdlib name)
            try:
                body = blobs[int(self.path.rsplit("/", 1)[1])]
            except (ValueError, IndexError):
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread, f"http://127.0.0.1:{server.server_address[1]}/shard/"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--sizes", type=int, nargs="+", default=[2, 4, 6, 8, 10])
    ap.add_argument("--target", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    x, y = make_shards(args.target, seed=args.seed)
    blobs = [encode_shard(x[i], y[i]) for i in range(args.target)]
    del x, y
    server, thread, base = serve(blobs)
    rng = np.random.default_rng(args.seed)
    err: dict[int, list[float]] = {n: [] for n in args.sizes}
    real: list[float] = []
    try:
        for _ in range(args.trials):
            runs = ["real", *args.sizes]
            seconds: dict[object, float] = {}
            for i in rng.permutation(len(runs)):
                key = runs[i]
                n = args.target if key == "real" else int(key)
                start = int(rng.integers(0, args.target - n + 1))  # random shards, Alg. 10
                urls = [f"{base}{j}" for j in range(start, start + n)]
                seconds[key] = time_download(urls, timeout=30).seconds
            real.append(seconds["real"])
            for n in args.sizes:
                pred = seconds[n] * args.target / n
                err[n].append(abs(pred - seconds["real"]) / seconds["real"] * 100)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    con = Console(width=120)
    table = Table(title=f"SB download-time error, {args.target} shards over loopback HTTP, "
                        f"{args.trials} trials (this machine)")
    for col in ("benchmark shards", "error % (mean)", "sd", "median", "thesis Ethernet %"):
        table.add_column(col, justify="right")
    for n in args.sizes:
        sd = statistics.stdev(err[n]) if len(err[n]) > 1 else 0.0
        table.add_row(str(n), f"{statistics.mean(err[n]):.1f}", f"{sd:.1f}",
                      f"{statistics.median(err[n]):.1f}",
                      f"{THESIS_ETHERNET.get(n, float('nan')):.1f}")
    con.print(table)
    mb = len(blobs[0]) * args.target / 1e6
    con.print(f"real download of {args.target} shards ({mb:.0f} MB): mean "
              f"{statistics.mean(real):.3f} s = {mb / statistics.mean(real):.0f} MB/s",
              highlight=False)


if __name__ == "__main__":
    main()
