#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The deepest stack of oxtrace's probe context, from the module's machine code.

Usage: scripts/stackcheck.py [--limit BYTES] [--verbose] oxtrace.ko

Every function's frame is read from its code the way the kernel's scripts/checkstack.pl
does (the `sub $N,%rsp` of its prologue), plus its pushes and return address; direct calls
(relocations included) give the call graph. The result is the deepest chain from each
entry point of probe context: the shim's handlers (SHIM_ROOTS: kprobes, the ftrace set of
entry probes (sys::kprobe's `oxt_fset`), ticks and the
providers' syscall, profile and tracepoint handlers, and with CONFIG_UPROBES the user-space
probes' handler and with CONFIG_FPROBE the return set's (sys::kprobe's `oxt_rset`) entry and
exit handlers, OPTIONAL_ROOTS) up to their indirect call into Rust,
plus the deepest chain below the Rust trampolines they call (RUST_ROOTS). Kernel functions outside
the module count as 0 here: they are the kernel's budget, and the probesafe list keeps them
out of reach of probes. Fails (exit 1) when a chain exceeds the limit (default 1024), or
when the fire path makes an indirect call or a variable-size allocation this script cannot
bound, or the graph has a cycle.
"""

import argparse
import re
import subprocess
import sys

SHIM_ROOTS = ["oxt_kprobe_pre", "oxt_kretprobe_ret", "oxt_fset_handler", "oxt_tick_fn",
              "oxt_sys_enter", "oxt_sys_exit", "oxt_profile_fn", "oxt_tpev_overflow"]
# Entry points only some kernels' configurations build (shim/uprobe.c under CONFIG_UPROBES,
# the fprobe set's handlers under CONFIG_FPROBE).
OPTIONAL_ROOTS = ["oxt_uprobe_handler", "oxt_rset_entry", "oxt_rset_exit"]
RUST_ROOTS = ["fire_trampoline", "fire_many_trampoline", "recursion_trampoline", "sys_fire",
              "sys_recursion"]

FUNC_RE = re.compile(r"^[0-9a-f]+ <(.+)>:$")
INSN_RE = re.compile(r"^\s*[0-9a-f]+:\s+(.*)$")
RELOC_RE = re.compile(r"^\s*[0-9a-f]+: R_X86_64_(?:PLT32|PC32)\s+(\S+?)(?:[-+]0x[0-9a-f]+)?$")
SUB_RE = re.compile(r"\bsub\s+\$0x([0-9a-f]+),%rsp")
ADD_NEG_RE = re.compile(r"\badd\s+\$0xf+([0-9a-f]+),%rsp")


class Func:
    def __init__(self, name):
        self.name = name
        self.frame = 8  # the return address
        self.calls = set()
        self.indirect = 0
        self.dynamic = False
        self.in_prologue = True


def parse(ko):
    out = subprocess.run(
        ["objdump", "-dr", "--no-show-raw-insn", ko],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    funcs = {}
    cur = None
    # The written target of the last call or tail call: in a .ko it is only a placeholder
    # when a relocation follows (the displacement is 0, so it names the next instruction,
    # which may be the next function), so it counts only if none does.
    pending = None
    for line in out.splitlines():
        m = FUNC_RE.match(line)
        if m:
            if pending:
                cur.calls.add(pending)
            pending = None
            cur = Func(m.group(1))
            funcs[cur.name] = cur
            continue
        if cur is None:
            continue
        r = RELOC_RE.match(line)
        if r:
            if pending is not None:
                cur.calls.add(r.group(1))
            pending = None
            continue
        m = INSN_RE.match(line)
        if not m:
            continue
        insn = m.group(1).strip()
        if pending:
            cur.calls.add(pending)
        pending = None
        op = insn.split()[0] if insn else ""
        if op in ("push", "pushq"):
            if cur.in_prologue:
                cur.frame += 8
            continue
        s = SUB_RE.search(insn)
        if s:
            cur.frame += int(s.group(1), 16)
            cur.in_prologue = False
            continue
        al = re.search(r"\band\s+\$0x([0-9a-f]+),%rsp", insn)
        if al:
            # Realignment: at most the alignment less 8 bytes of padding.
            cur.frame += (1 << 64) - int(al.group(1), 16) - 8
            continue
        if re.search(r"\bsub\s+%\w+,%rsp", insn):
            cur.dynamic = True
        if op in ("call", "callq"):
            target = insn.split(None, 1)[1] if " " in insn else ""
            if "*" in target or "__x86_indirect_thunk" in target:
                cur.indirect += 1
            else:
                t = re.search(r"<([^>+]+)(?:\+0x[0-9a-f]+)?>", target)
                pending = t.group(1) if t and not target.startswith("0 ") else ""
        elif op in ("jmp", "jmpq") and ("__x86_indirect_thunk" in insn or "*" in insn):
            cur.indirect += 1
        elif op in ("jmp", "jmpq"):
            # A tail call: the callee reuses this frame's return address slot.
            t = re.search(r"<([^>+]+)(?:\+0x[0-9a-f]+)?>", insn)
            pending = t.group(1) if t and t.group(1) != cur.name else ""
        if op not in ("push", "pushq", "mov", "lea", "endbr64", "nop", "nopl", "nopw", "xchg"):
            cur.in_prologue = False
    if cur and pending:
        cur.calls.add(pending)
    for f in funcs.values():
        f.calls = {c for c in f.calls if c in funcs and c != f.name}
    return funcs


def deepest(funcs, name, stack, memo, problems):
    """(bytes, chain) of the deepest path from `name`."""
    if name in memo:
        return memo[name]
    if name in stack:
        problems.append("cycle: " + " -> ".join(stack[stack.index(name):] + [name]))
        return (0, [])
    f = funcs[name]
    if f.dynamic:
        problems.append(f"{name}: variable-size stack allocation")
    best = (0, [])
    for c in sorted(f.calls):
        d = deepest(funcs, c, stack + [name], memo, problems)
        if d[0] > best[0]:
            best = d
    memo[name] = (f.frame + best[0], [(name, f.frame)] + best[1])
    return memo[name]


def demangle(names):
    """Readable names, where c++filt knows the mangling."""
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), check=True,
                             capture_output=True, text=True).stdout.splitlines()
        return dict(zip(names, out)) if len(out) == len(names) else {}
    except OSError:
        return {}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=1024)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("ko")
    a = ap.parse_args()
    funcs = parse(a.ko)
    memo, problems = {}, []
    rust = [n for n in funcs if any(r in n for r in RUST_ROOTS)]
    if not rust:
        sys.exit(f"stackcheck: no Rust trampoline ({', '.join(RUST_ROOTS)}) in {a.ko}")
    below = max((deepest(funcs, n, [], memo, problems) for n in rust), key=lambda d: d[0])
    # Indirect calls below the trampolines are calls this script cannot follow.
    seen, todo = set(), [n for n, _ in below[1]] + rust
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if funcs[n].indirect:
            problems.append(f"{n}: {funcs[n].indirect} indirect call(s) in the fire path")
        todo.extend(funcs[n].calls)
    worst = 0
    for root in SHIM_ROOTS + [r for r in OPTIONAL_ROOTS if r in funcs]:
        if root not in funcs:
            sys.exit(f"stackcheck: no {root} in {a.ko}")
        shim = deepest(funcs, root, [], memo, problems)
        total = shim[0] + below[0]
        worst = max(worst, total)
        chain = shim[1] + [("(indirect)", 0)] + below[1]
        print(f"stackcheck: {root}: {total} bytes")
        if a.verbose or total > a.limit:
            names = demangle([n for n, _ in chain])
            for n, b in chain:
                print(f"  {b:6d}  {names.get(n, n)}")
    ok = worst <= a.limit and not problems
    for p in sorted(set(problems)):
        print(f"stackcheck: {p}")
    print(f"stackcheck: deepest probe-context chain {worst} bytes, limit {a.limit}: "
          + ("ok" if ok else "FAILED"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
