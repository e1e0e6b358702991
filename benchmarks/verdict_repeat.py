"""Does the quick start give the same "this CPU" verdict run after run (issue 48, item 4)?

Runs the README's quick-start sweep (`perflab sweep env-size --aslr off --step 2 --repeat 20`)
--times times in a row, each a fresh perflab process, and prints the machine, then each run's
"this CPU:" lines (the in-process 4K-aliasing check) and its prediction, then whether the
verdicts agree. --repeat lowers the sweep's repeat for a quicker look (the check is the same).
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perflab.system import machine

VERDICT = re.compile(r"this CPU (pays|does not pay)|unstable here")


def machine_line() -> str:
    """The CPU, its family and model, the hypervisor, the usable CPUs and the load now."""
    info = machine.cpuinfo()
    family = (f" (family {int(info['cpu family']):X}h, model {int(info.get('model', 0)):X}h)"
              if "cpu family" in info else "")  # fmt: skip
    return (
        f"{machine.cpu_model()}{family}; {machine.hypervisor() or 'bare metal'}; "
        f"{len(machine.usable_cpus())} usable CPUs; load {os.getloadavg()[0]:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--times", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=20, help="the sweep's --repeat")
    args = parser.parse_args()
    print(machine_line())
    seen = []
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
            print(f"run {n} ({took:.0f} s): {verdict}")
            for x in [*(y for y in lines if y.startswith("predicted:")), *checks]:
                print(f"    {x}")
            if done.returncode:
                print("    " + (done.stderr.strip().splitlines() or ["(no stderr)"])[-1])
    if len(set(seen)) == 1:
        print(f"the same verdict in {len(seen)} runs: {seen[0]}")
    else:
        print(f"NOT the same verdict in {len(seen)} runs: {sorted(set(seen))}")


if __name__ == "__main__":
    main()
