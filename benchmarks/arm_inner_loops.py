"""The aarch64 int8 micro-kernels' inner loops (GEMM and depthwise), counted from the compiled code:
instructions per iteration and multiply-accumulates per instruction, beside the best its ISA's
product instruction allows. Emulation measures no speed, so this is the design's check of the ARM
kernels.

    cmake -S deploy_runtime -B build/arm -G Ninja \
          -DCMAKE_TOOLCHAIN_FILE=$PWD/deploy_runtime/cmake/aarch64-linux-gnu.cmake
    cmake --build build/arm && python -m benchmarks.arm_inner_loops build/arm

Prints a table and writes benchmarks/results/arm_inner_loops.json. Needs Debian's
binutils-aarch64-linux-gnu (it comes with g++-aarch64-linux-gnu).
"""
import argparse
import collections
import json
import re
import subprocess
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"

# Multiply-accumulates per instruction of the product instructions, 128-bit registers: sdot and
# smmla as named; the widening multiplies one per lane of their destination (8 of bytes into .8h,
# 4 of int16 into .4s).
MACS = {"sdot": 16, "smmla": 32}
WIDENING = ("smull", "smull2", "smlal", "smlal2")
LANES = {"8h": 8, "4s": 4, "2d": 2}


def macs(op, args):
    if op in WIDENING:
        m = re.match(r"v\d+\.(\w+)", args)
        return LANES.get(m.group(1), 0) if m else 0
    return MACS.get(op, 0)


# Each kernel's ISA and the most multiply-accumulates one instruction of it can do.
KERNELS = {"gemm_int8_neon": ("neon", "smlal", 8), "gemm_int8_dotprod": ("dotprod", "sdot", 16),
           "gemm_int8_i8mm": ("i8mm", "smmla", 32),
           "depthwise_int8_w16_neon": ("neon", "smlal", 8)}


def instructions(obj):
    text = subprocess.run(["aarch64-linux-gnu-objdump", "-d", "--no-show-raw-insn", str(obj)],
                          check=True, capture_output=True, text=True).stdout
    found = []
    for line in text.splitlines():
        m = re.match(r"\s+([0-9a-f]+):\s+(\S+)\s*(.*)", line)
        if m:
            found.append((int(m.group(1), 16), m.group(2), m.group(3)))
    return found


def inner_loop(found):
    """The loop (a backward branch's span) with the most multiply-accumulates, the shortest of
    equals: the kernel's K loop (a depthwise kernel's: its step of outputs at its largest kernel)."""
    best = None
    for address, op, args in found:
        target = re.search(r"([0-9a-f]+) <", args)
        if not op.startswith("b") or op in ("bl", "blr", "br") or not target:
            continue
        start = int(target.group(1), 16)
        if start >= address:
            continue
        body = [i for i in found if start <= i[0] <= address]
        total = sum(macs(op, args) for _, op, args in body)
        if total and (best is None or (total, -len(body)) > (best[0], -len(best[1]))):
            best = (total, body)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", type=Path, help="an aarch64 build directory of deploy_runtime")
    args = parser.parse_args()
    rows = []
    for name, (isa, best_op, best) in KERNELS.items():
        objects = list(args.build.rglob(f"{name}.cpp.o"))
        if not objects:
            raise SystemExit(f"{name}.cpp.o not found under {args.build}: build the runtime "
                             "with deploy_runtime/cmake/aarch64-linux-gnu.cmake first")
        macs, body = inner_loop(instructions(objects[0]))
        mix = collections.Counter(op for _, op, _ in body)
        rows.append({"kernel": name, "isa": isa, "instructions": len(body), "macs": macs,
                     "macs_per_instruction": round(macs / len(body), 1),
                     "isa_best": best, "isa_best_instruction": best_op, "mix": dict(mix)})
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "arm_inner_loops.json").write_text(json.dumps(rows, indent=1) + "\n")
    print("| micro-kernel | instructions per iteration | MACs | MACs / instruction | ISA's best |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['kernel']} | {r['instructions']} | {r['macs']} | "
              f"{r['macs_per_instruction']} | {r['isa_best']} ({r['isa_best_instruction']}) |")


if __name__ == "__main__":
    main()
