"""The ``qtk`` command.

    qtk fastrun model.qmodel --cache FILE [--threads N]

``fastrun`` times every candidate algorithm of each layer on this machine (Fast-Run), records the
winners in FILE and prints which algorithm serves each node. Sessions that load the model with
``qtk.runtime.load(path, threads=N, fast_run="use", fast_run_cache=FILE)`` then take the same
kernels without timing.
"""
import argparse
import collections
import sys

from . import runtime


def fastrun(args):
    session = runtime.load(args.model, threads=args.threads, fast_run="search",
                           fast_run_cache=args.cache)
    ops = session.model.op_names
    width = max(len(op) for op in ops)
    for index, (op, algorithm) in enumerate(zip(ops, session.algorithms)):
        if algorithm != "reference":
            print(f"{index:4d}  {op:<{width}}  {algorithm}")
    counts = collections.Counter(a for a in session.algorithms if a != "reference")
    summary = ", ".join(f"{n} x {a}" for a, n in counts.most_common()) or "no layer had a choice"
    print(f"{args.model}: {summary} ({args.threads} thread(s)); cache: {args.cache}")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="qtk", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("fastrun", help="choose each layer's algorithm by timing")
    command.add_argument("model", help="the .qmodel file")
    command.add_argument("--cache", required=True, help="the Fast-Run cache file to fill")
    command.add_argument("--threads", type=int, default=1, help="the sessions' thread count")
    command.set_defaults(run=fastrun)
    args = parser.parse_args(argv)
    try:
        args.run(args)
    except runtime.QtkError as error:
        sys.exit(f"qtk {args.command}: {error}")


if __name__ == "__main__":
    main()
