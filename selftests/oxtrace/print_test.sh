#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# print(), tracemem(), link_ntop() and freopen() through the real module: typed objects
# of D and of the kernel (BTF), memory as hex, the output file reopened (TAP).
cd "$(dirname "$0")" || exit 1
. ./tap.sh
W="./oxt_workload read 4 2000"

echo "TAP version 13"
plan 7

# A D struct in alloca() memory, shown as Oracle's DTrace shows it (the address aside).
run 'struct inner { long e; unsigned int f; };
struct t { int a; char b[5]; struct inner s; int z; };
BEGIN {
	p = (struct t *)alloca(sizeof (struct t));
	p->a = 1; p->b[0] = 104; p->b[1] = 105; p->s.f = 7;
	print(p);
	exit(0);
}'
I="                                            "
expect "print() of a D struct by its pointer" "0xADDR = *
$I(struct t) {
$I .a = (int)1,
$I .b = (char [5]) [
$I  (char)'h',
$I  (char)'i',
$I ],
$I .s = (struct inner) {
$I  .f = (unsigned int)7,
$I },
$I}" "$(echo "$out" | sed '1s/^0x[0-9a-f]* = \*$/0xADDR = */')"

# A kernel struct from BTF at an fbt probe: vfs_read()'s struct file.
run 'fbt::vfs_read:entry /pid == $target/ { print(args[0]); exit(0); }' -c "$W"
if echo "$out" | head -1 | grep -q '^0xff[0-9a-f]* = \*$' &&
	echo "$out" | grep -q "^$I(struct file) {\$" &&
	echo "$out" | grep -q "^$I \.f_op = (struct file_operations \*)0xffff[0-9a-f]*,\$" &&
	echo "$out" | grep -q "^$I}\$"; then
	ok "print() of a kernel struct at an fbt probe"
else
	nok "print() of a kernel struct at an fbt probe" "$out" "$err"
fi

# tracemem() of kernel memory: linux_banner starts "Linux version 6.".
banner=$(grep ' linux_banner$' /proc/kallsyms | cut -d' ' -f1)
run "BEGIN { tracemem((void *)0x$banner, 16); tracemem((void *)0x$banner, 16, 5); exit(0); }"
H="             0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f  0123456789abcdef"
expect "tracemem() with a static and a dynamic size" "
$H
         0: 4c 69 6e 75 78 20 76 65 72 73 69 6f 6e 20 36 2e  Linux version 6.

$H
         0: 4c 69 6e 75 78                                   Linux" "$out"

run 'BEGIN { tracemem((void *)8, 4); } BEGIN { exit(0); }'
if echo "$err" | grep -q "invalid address (0x8)" && [ "$rc" = 0 ]; then
	ok "tracemem() of an unreadable address is a runtime error"
else
	nok "tracemem() of an unreadable address is a runtime error" "rc=$rc" "$err"
fi

run "BEGIN { printf(\"%s\\n\", link_ntop(ARPHRD_ETHER, (void *)0x$banner)); exit(0); }"
expect "link_ntop() of kernel memory" "4c:69:6e:75:78:20" "$out"

run 'BEGIN { trace(inet_ntoa(arg0)); }'
expect_fail "inet_ntoa() of an integer is refused as DTrace refuses it" \
	"[D_PROTO_ARG] inet_ntoa( ) argument #1 is incompatible with prototype"

rm -f /tmp/freopen.out
run 'BEGIN { freopen("/tmp/freopen.%d", 1); printf("to the file\n");
	freopen(""); printf("to stdout\n"); exit(0); }' -w
expect "freopen() reopens the output and freopen(\"\") restores it" \
	"to stdout|to the file" "$out|$(cat /tmp/freopen.1 2>&1)"

tap_exit
