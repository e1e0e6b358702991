"""Does the quick start give the same "this CPU" verdict run after run, and does it agree with
the sweep's own verdict on its predicted windows?

Runs the README's quick-start sweep (`perflab sweep env-size --aslr off --step 2 --repeat 20`)
--times times in a row, each a fresh perflab process, and prints the machine, then each run's
layout, "this CPU:" lines (the swept binary timed at each predicted window against its
neighbours) and its prediction, then whether the verdicts agree from run to run and, in each
run, the check with the sweep (pays where the windows are predicted and seen, does not pay
where they are predicted, not seen). --repeat lowers the sweep's repeat for a quicker look.

--fresh N instead looks at why one check can differ from the next: N fresh processes each
time the loop kernel (aliased as the quick start's prediction, &inc ≡ &k, and not) in 8
rounds of 11 pairs 50 ms apart, and print the first pair's ticks per iteration beside the
medians of each round: a cold first reading shows in the first column, a core whose speed
changes over time in the rounds.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perflab.system import machine

VERDICT = re.compile(r"this CPU (pays|does not pay)|unstable here|unclear")
SEEN = re.compile(r"^\s*[\d,]+\s+[\d,]+\s+(predicted and seen|predicted, not seen)\s")


def machine_line() -> str:
    """The CPU, its family and model, the hypervisor, the usable CPUs and the load now."""
    info = machine.cpuinfo()
    family = (f" (family {int(info['cpu family']):X}h, model {int(info.get('model', 0)):X}h)"
              if "cpu family" in info else "")  # fmt: skip
    return (
        f"{machine.cpu_model()}{family}; {machine.hypervisor() or 'bare metal'}; "
        f"{len(machine.usable_cpus())} usable CPUs; load {os.getloadavg()[0]:.2f}"
    )


FRESH = """
import json, time
import numpy as np
from perflab.core import bindings
from perflab.lab.env_size import aliasing as al
apart = al.loop_distances(["&inc (stack) ≡ &k (static)"])[0]
n = 65536
first = bindings.alias_time("loop", apart, apart + al.LINE, n, 1)
rounds = []
for r in range(8):
    time.sleep(0.05)
    a, d = bindings.alias_time("loop", apart, apart + al.LINE, n, 11)
    rounds.append([float(np.median(a)) / n, float(np.median(d)) / n])
print(json.dumps({"first": [int(first[0][0]) / n, int(first[1][0]) / n], "rounds": rounds}))
"""


def fresh(count: int) -> None:
    """The first reading and each round's medians, in `count` fresh processes."""
    print(f"{count} fresh processes: loop kernel, &inc ≡ &k aliased/not, ticks per iteration")
    print("first pair      | medians of 8 rounds of 11 pairs, 50 ms apart (aliased/not)")
    for _ in range(count):
        done = subprocess.run([sys.executable, "-c", FRESH], capture_output=True, text=True,
                              check=True)  # fmt: skip
        got = json.loads(done.stdout)
        a, d = got["first"]
        rounds = " ".join(f"{x:.1f}/{y:.1f}" for x, y in got["rounds"])
        print(f"{a:6.1f}/{d:<6.1f}   | {rounds}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--times", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=20, help="the sweep's --repeat")
    parser.add_argument("--fresh", type=int, default=0, help="first readings in N processes")
    args = parser.parse_args()
    print(machine_line(), flush=True)
    if args.fresh:
        fresh(args.fresh)
        return
    seen, agreed = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(1, args.times + 1):
            out = Path(tmp) / f"run{n}.parquet"
            cmd = [sys.executable, "-m", "perflab", "sweep", "env-size", "--aslr", "off",
                   "--step", "2", "--repeat", str(args.repeat), "-o", str(out)]  # fmt: skip
            start = time.monotonic()
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            took = time.monotonic() - start
            lines = done.stdout.splitlines()
            checks = [x for x in lines if x.startswith("this CPU:")]
            found = [m.group(0) for x in checks if (m := VERDICT.search(x))]
            verdict = " / ".join(found) if found else f"no verdict (exit {done.returncode})"
            seen.append(verdict)
            windows = [m.group(1) for x in lines if (m := SEEN.match(x))]
            pays = bool(found) and all(f == "this CPU pays" for f in found)
            none = bool(found) and all(f == "this CPU does not pay" for f in found)
            seen_all = bool(windows) and all(w == "predicted and seen" for w in windows)
            unseen_all = bool(windows) and all(w == "predicted, not seen" for w in windows)
            agree = (pays and seen_all) or (none and unseen_all)
            agreed += agree
            print(f"run {n} ({took:.0f} s): {verdict}; the sweep: {', '.join(windows) or '-'}"
                  f"{'' if agree else ' (DISAGREE)'}", flush=True)  # fmt: skip
            shown = ("layout ", "predicted:", "windows at ")
            for x in [*(y for y in lines if y.startswith(shown)), *checks]:
                print(f"    {x}")
            if done.returncode:
                print("    " + (done.stderr.strip().splitlines() or ["(no stderr)"])[-1])
    if len(set(seen)) == 1:
        print(f"the same verdict in {len(seen)} runs: {seen[0]}")
    else:
        print(f"NOT the same verdict in {len(seen)} runs: {sorted(set(seen))}")
    print(f"the check and the sweep's windows agree in {agreed} of {len(seen)} runs")


if __name__ == "__main__":
    main()
