"""Hostile use of every command: malformed options, full disks, oversized and deeply nested
files, devices for files. Prints a table of what came back and exits 1 on any violation.

Cases
-----
- options: every numeric option of every command (walked from the click commands) with
  values it must refuse (NaN, infinities, below its minimum, above its maximum, not a number),
  run in-process through click's test runner;
- paths: a missing input, a folder for a file and a file for a folder, outputs under /proc;
- full disk: every command that writes (``solve -o``, ``generate``, ``export`` in each
  format, ``sweep``, ``simulate -o``, ``tau-scan --plot``, ``examples``, ``batch`` with one
  and two jobs, ``schema -o``, ``reproduce``, ``train``) writing into a full file system: a
  2 MB tmpfs filled to the last byte when this process may mount one (root), else a file size
  limit of 512 bytes (``RLIMIT_FSIZE``) on the command's process, run as subprocesses;
- big files: a sparse file one byte past the input limit, ``/dev/zero``, and a JSON document
  nested 100,000 levels deep, given to every command that reads an instance.

Checks, per case: the exit code is a documented one (0, 1, 2, 130) and the expected one where
it is known (2 for every case above); no ``Traceback`` and no ``internal error`` on the output,
and exactly one ``error:`` line with exit code 2;
with ``--json``, standard output is empty (an error) or parses as JSON; an existing output file
is unchanged after a failed write; every input file is byte-identical afterwards.

    python benchmarks/hostile_cli.py [--only options|paths|disk|big] [--no-mount]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import click
from click.testing import CliRunner
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mel_opt.cli import cli  # noqa: E402
from mel_opt.limits import MAX_INPUT_BYTES  # noqa: E402

DOCUMENTED = {0, 1, 2, 130}
INST = ROOT / "instances"
MEL = next((INST / "mel-async").glob("*.json"))
MED = INST / "med" / "mays2023_n4_m2.json"
TAU = INST / "adaptive-tau" / "cnn_phi.json"
FEEL = INST / "feel" / "ren2021_cpu_densenet121_k6.json"


@dataclass
class Outcome:
    kind: str
    args: list[str]
    code: int
    output: str
    stdout: str = ""
    expect: int | None = 2
    problems: list[str] = field(default_factory=list)

    def check(self) -> None:
        if self.code not in DOCUMENTED:
            self.problems.append(f"undocumented exit code {self.code}")
        elif self.expect is not None and self.code != self.expect:
            self.problems.append(f"exit code {self.code}, expected {self.expect}")
        if "Traceback" in self.output:
            self.problems.append("traceback")
        if "internal error" in self.output:
            self.problems.append("internal error")
        if self.code == 2 and sum(1 for line in self.output.splitlines()
                                  if line.startswith("error: ")) != 1:
            self.problems.append("not exactly one error line")
        if "--json" in self.args and self.stdout.strip():
            try:
                json.loads(self.stdout)
            except ValueError:
                self.problems.append("--json stdout does not parse")


# --- malformed options -------------------------------------------------------------------

def _bad_values(t: click.ParamType) -> list[str]:
    values = ["abc", ""]
    if isinstance(t, (click.IntRange, click.FloatRange)):
        if t.min is not None:
            values.append(str(t.min - 1))
        if t.max is not None:
            values.append(str(t.max + 1))
        if isinstance(t, click.FloatRange):
            values += ["nan", "inf", "-inf", "1e999", "-1e999"]
        else:
            values += ["1.5", "1e3"]
    return values


def option_cases() -> Iterator[Outcome]:
    ctx = click.Context(cli)
    runner = CliRunner()
    for name in cli.list_commands(ctx):
        cmd = cli.get_command(ctx, name)
        assert cmd is not None
        for p in cmd.params:
            if not isinstance(p, click.Option) or p.is_flag:
                continue
            if not isinstance(p.type, (click.types.FloatParamType, click.types.IntParamType)):
                continue
            for value in _bad_values(p.type):
                args = [name, p.opts[0], value, "--json"]
                res = runner.invoke(cli, args)
                out = res.output
                if res.exception is not None and not isinstance(res.exception, SystemExit):
                    out += f"\nTraceback: {type(res.exception).__name__}"
                yield Outcome("options", args, res.exit_code, out, res.stdout)


def path_cases() -> Iterator[Outcome]:
    """Paths that cannot be used: missing, a folder for a file, a file for a folder, a
    folder without write permission, /proc."""
    runner = CliRunner()
    with tempfile.TemporaryDirectory(prefix="melopt-hostile-") as tmp:
        t = Path(tmp)
        (t / "file").write_text("x")
        cases = [["solve", str(t / "missing.json"), "--json"], ["solve", str(t), "--json"],
                 ["solve", str(MEL), "-o", str(t)], ["solve", str(MEL), "-o", "/proc/x.json"],
                 ["generate", "mel-async", "-o", str(t / "file" / "g.json")],
                 ["batch", str(t / "file"), "-o", str(t / "o")],
                 ["batch", str(INST / "dab"), "-o", str(t / "file")],
                 ["export", str(MEL), "--format", "lp", "-o", "/proc/x.lp"],
                 ["simulate", str(MEL), "--json"], ["tau-scan", str(MEL), "--json"],
                 ["tau-scan", str(TAU), "--plot", "/proc/t.png"],
                 ["examples", str(t / "file")], ["validate", "/proc/self/mem"]]
        for args in cases:
            res = runner.invoke(cli, args)
            out = res.output
            if res.exception is not None and not isinstance(res.exception, SystemExit):
                out += f"\nTraceback: {type(res.exception).__name__}"
            yield Outcome("paths", args, res.exit_code, out, res.stdout)


# --- full disk ---------------------------------------------------------------------------

@contextlib.contextmanager
def full_disk(mount: bool = True) -> Iterator[tuple[Path, str]]:
    """A folder on a full file system and how it is full ("tmpfs" or "rlimit")."""
    with tempfile.TemporaryDirectory(prefix="melopt-hostile-") as tmp:
        mnt = Path(tmp) / "full"
        mnt.mkdir()
        mounted = False
        if mount and hasattr(os, "geteuid") and os.geteuid() == 0:
            mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs",
                                      str(mnt)], capture_output=True).returncode == 0
        try:
            if mounted:
                with contextlib.suppress(OSError), open(mnt / "filler", "wb") as fh:
                    while True:
                        fh.write(b"\0" * 4096)
                        fh.flush()
                yield mnt, "tmpfs"
            else:
                yield mnt, "rlimit"
        finally:
            if mounted:
                subprocess.run(["umount", str(mnt)], capture_output=True)


def _limit_fsize() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (512, resource.getrlimit(
        resource.RLIMIT_FSIZE)[1]))


def _run(args: list[str], how: str = "tmpfs", timeout: float = 600) -> tuple[int, str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    pre = _limit_fsize if how == "rlimit" else None
    try:
        done = subprocess.run([sys.executable, "-m", "mel_opt.cli", *args], capture_output=True,
                              text=True, env=env, cwd=ROOT, timeout=timeout, preexec_fn=pre)
    except subprocess.TimeoutExpired:
        return -1, "", "hang"
    return done.returncode, done.stdout, done.stderr


def disk_cases(mount: bool = True) -> Iterator[Outcome]:
    with full_disk(mount) as (d, how):
        writers = [
            ("r.json", ["solve", str(MEL), "--json", "-o", "{out}"]),
            ("g.json", ["generate", "mel-async", "-o", "{out}"]),
            ("m.lp", ["export", str(MEL), "--format", "lp", "-o", "{out}"]),
            ("m.mps", ["export", str(MEL), "--format", "mps", "-o", "{out}"]),
            ("m.nl", ["export", str(FEEL), "--format", "nl", "-o", "{out}"]),
            ("m.gms", ["export", str(MEL), "--format", "gms", "-o", "{out}"]),
            ("s.json", ["simulate", str(MED), "--trials", "2", "--cycles", "1", "--json",
                        "-o", "{out}"]),
            ("t.png", ["tau-scan", str(TAU), "--plot", "{out}"]),
            ("ex", ["examples", "{out}"]),
            ("sw", ["sweep", "mel-async", "--learners", "3:4", "--seeds", "1", "-o", "{out}"]),
            ("b1", ["batch", str(INST / "dab"), "-o", "{out}"]),
            ("b2", ["batch", str(INST / "dab"), "-j", "2", "-o", "{out}"]),
            ("schema.json", ["schema", "dab", "-o", "{out}"]),
            ("rep", ["reproduce", "003-fig3", "-o", "{out}"]),
            ("tr", ["train", str(INST / "dab" / "worked_example.json"), "--schemes", "dab",
                    "--cycles", "1", "--seeds", "1", "-o", "{out}"]),
        ]
        for name, args in writers:
            target = d / name
            previous = None
            if "." in name and how == "rlimit":  # a previous file to keep intact
                target.write_bytes(b"previous\n")
                previous = b"previous\n"
            full = [a.replace("{out}", str(target)) for a in args]
            code, out, err = _run(full, how)
            o = Outcome(f"disk ({how})", full, code, err + out, out)
            if str(target) not in err:
                o.problems.append("error does not name the output path")
            if previous is not None and target.read_bytes() != previous:
                o.problems.append("previous file changed")
            yield o


# --- big and nested files ------------------------------------------------------------------

def big_cases() -> Iterator[Outcome]:
    with tempfile.TemporaryDirectory(prefix="melopt-hostile-") as tmp:
        t = Path(tmp)
        big = t / "big.json"
        with open(big, "wb") as fh:
            fh.truncate(MAX_INPUT_BYTES + 1)  # sparse: no disk used
        nested = t / "nested.json"
        nested.write_text("[" * 100_000 + "]" * 100_000)
        folder = t / "folder"
        folder.mkdir()
        (folder / "big.json").symlink_to(big)
        (folder / "nested.json").symlink_to(nested)
        readers = [["solve", "{f}", "--json"], ["validate", "{f}"], ["compare", "{f}", "--json"],
                   ["export", "{f}", "--format", "lp", "-o", str(t / "x.lp")],
                   ["simulate", "{f}", "--json"], ["tau-scan", "{f}", "--json"],
                   ["train", "{f}", "--schemes", "x", "-o", str(t / "train")]]
        for f in (big, nested, Path("/dev/zero")):
            for args in readers:
                full = [a.replace("{f}", str(f)) for a in args]
                code, out, err = _run(full, timeout=120)
                yield Outcome("big/nested", full, code, err + out, out)
        code, out, err = _run(["batch", str(folder), "-o", str(t / "b")], timeout=120)
        yield Outcome("big/nested", ["batch", "(big, nested)"], code, err + out, out, expect=1)


def _hashes(root: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*.json"))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=["options", "paths", "disk", "big"], default=None)
    ap.add_argument("--no-mount", action="store_true",
                    help="Fill the disk with a file size limit even where a tmpfs can be mounted.")
    a = ap.parse_args()
    before = _hashes(INST)
    groups = {"options": option_cases, "paths": path_cases,
              "disk": lambda: disk_cases(not a.no_mount), "big": big_cases}
    outcomes: list[Outcome] = []
    for name, make in groups.items():
        if a.only in (None, name):
            for o in make():
                o.check()
                outcomes.append(o)
    changed = [p for p, h in _hashes(INST).items() if before.get(p) != h]
    console = Console()
    table = Table(title="hostile command lines")
    for col in ("kind", "cases", "exit 0", "exit 1", "exit 2", "other", "violations"):
        table.add_column(col, justify="right" if col != "kind" else "left")
    for kind in dict.fromkeys(o.kind for o in outcomes):
        mine = [o for o in outcomes if o.kind == kind]
        codes = Counter(o.code for o in mine)
        table.add_row(kind, str(len(mine)), str(codes[0]), str(codes[1]), str(codes[2]),
                      str(sum(v for k, v in codes.items() if k not in (0, 1, 2))),
                      str(sum(1 for o in mine if o.problems)))
    console.print(table)
    bad = [o for o in outcomes if o.problems]
    for o in bad[:20]:
        console.print(f"[red]{', '.join(o.problems)}[/]: melopt {' '.join(o.args)}",
                      highlight=False)
        console.print("   " + o.output.strip().splitlines()[-1][:200] if o.output.strip()
                      else "   (no output)", highlight=False, markup=False)
    console.print(f"inputs byte-identical afterwards: {'yes' if not changed else changed}")
    return 1 if bad or changed else 0


if __name__ == "__main__":
    sys.exit(main())
