#!/usr/bin/env python3
"""Runs a command and reports its wall time and peak memory, sampled from /proc.

usage: benches/measure.py [--interval SECONDS] -- COMMAND [ARGS...]

Prints one JSON line on stderr: wall seconds, exit code, peak resident memory (VmHWM), and the
peaks of the anonymous and file-backed parts of the resident set (RssAnon, RssFile, sampled
every --interval seconds: a mapped weight file counts in RssFile, decoded tensors and
activations in RssAnon). Linux only; needs no packages.
"""

import argparse
import json
import subprocess
import sys
import time


def status_kib(pid):
    """The process's /proc status fields that end in kB, as KiB integers."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if len(parts) == 2 and parts[1] == "kB":
                    out[key] = int(parts[0])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval", type=float, default=0.05)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    start = time.monotonic()
    proc = subprocess.Popen(command)
    peak = {"VmHWM": 0, "RssAnon": 0, "RssFile": 0}
    while proc.poll() is None:
        s = status_kib(proc.pid)
        for k in peak:
            peak[k] = max(peak[k], s.get(k, 0))
        time.sleep(args.interval)
    wall = time.monotonic() - start
    report = {
        "wall_s": round(wall, 2),
        "exit": proc.returncode,
        "peak_rss_mib": round(peak["VmHWM"] / 1024, 1),
        "peak_anon_mib": round(peak["RssAnon"] / 1024, 1),
        "peak_file_mib": round(peak["RssFile"] / 1024, 1),
    }
    print(json.dumps(report), file=sys.stderr)
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
