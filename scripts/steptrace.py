# SPDX-License-Identifier: GPL-2.0
"""gdb script of scripts/steptrace.sh: single-steps one read() of the guest.

Run as `gdb -batch -nx -x steptrace.py vmlinux` against QEMU's gdbstub (port 1234) with
OUT (output prefix), SKIP (ksys_read(fd, buf, 1) hits let go first), MAP (System.map),
BREAK (another function to step, with an optional gdb condition after it)
and KSYMS (the guest's kallsyms lines for the module and BPF programs) in the
environment. Writes OUT.txt (instructions per function), OUT.runs (the functions in
the order they ran: instructions, function) and OUT.seq (address and function of every
instruction), then detaches, which lets the guest go on.
"""

import bisect
import collections
import os

import gdb  # pylint: disable=import-error

# A bound on the steps: a read() under a program takes a few thousand; a trace that runs
# away (a return address never reached) stops here rather than never.
MAX_STEPS = 200_000


def symbols(paths):
    """Sorted (address, name) of the text symbols in System.map-style files."""
    syms = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                p = line.split()
                if len(p) >= 3 and p[1] in "tTwW":
                    syms.append((int(p[0], 16), p[2]))
    syms.sort()
    return syms


def main():
    out = os.environ["OUT"]
    skip = int(os.environ.get("SKIP", "3000"))
    syms = symbols([os.environ["MAP"], os.environ["KSYMS"]])
    addrs = [a for a, _ in syms]

    def name(pc):
        i = bisect.bisect_right(addrs, pc) - 1
        return syms[i][1] if i >= 0 else "?"

    gdb.execute("set pagination off")
    gdb.execute("target remote :1234")
    # Hardware breakpoint: the kernel text is read-only. The read loop's reads are of
    # one byte; the condition keeps the others out. BREAK (steptrace.sh's BREAK_OX,
    # BREAK_BT) steps another function, a module's too: gdb knows vmlinux only, so a
    # name found in the symbols becomes its address.
    where = os.environ.get("BREAK") or "ksys_read if $rdx == 1"
    func, _, cond = where.partition(" ")
    by_name = {n: a for a, n in syms}
    if func in by_name:
        func = f"*{by_name[func]:#x}"
    gdb.execute(f"hbreak {func} {cond}".rstrip())
    gdb.execute(f"ignore 1 {skip}")
    gdb.execute("continue")
    inf = gdb.selected_inferior()
    rsp = int(gdb.parse_and_eval("$rsp"))
    ret = int.from_bytes(inf.read_memory(rsp, 8).tobytes(), "little")
    gdb.execute("delete")
    # Each vCPU is a thread of the gdbstub: without this a step may resume on another one
    # (a timer's, the cleaner's) and the trace would follow it there.
    gdb.execute("set scheduler-locking on")
    seq = []
    while len(seq) < MAX_STEPS:
        pc = int(gdb.parse_and_eval("$pc"))
        if pc == ret:
            break
        seq.append(pc)
        gdb.execute("stepi", to_string=True)
    names = [name(pc) for pc in seq]
    with open(out + ".txt", "w", encoding="utf-8") as f:
        f.write(f"TOTAL {len(seq)}{' (stopped at the bound)' if len(seq) >= MAX_STEPS else ''}\n")
        for k, v in collections.Counter(names).most_common():
            f.write(f"{v:6d} {k}\n")
    with open(out + ".runs", "w", encoding="utf-8") as f:
        i = 0
        while i < len(names):
            j = i
            while j < len(names) and names[j] == names[i]:
                j += 1
            f.write(f"{j - i:6d} {names[i]}\n")
            i = j
    with open(out + ".seq", "w", encoding="utf-8") as f:
        for pc, n in zip(seq, names):
            f.write(f"{pc:x} {n}\n")
    gdb.execute("detach")


main()
