#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The D language through the real module: declarations, types, structs, arrays, strings
# in every storage class, if/else, lvalues, and the errors of each: TAP, exact output.
cd "$(dirname "$0")" || exit 1
. ./tap.sh
W="./oxt_workload read 4 2000"

echo "TAP version 13"
plan 13

run 'int x; uint8_t c; short s; unsigned long long u;
     BEGIN { x = 5; x++; c = 255; c++; s = 40000; u = -1; u /= 2;
       printf("%d %d %d %u %d %d\n", x, c, s, u, -7 / 2, -7 % 2);
       printf("%d %d %d %d\n", sizeof(uchar_t), sizeof(ushort_t), sizeof(uint_t), sizeof(u_longlong_t));
       exit(0); }'
expect "declared integer types, signed / and %" "6 0 -25536 9223372036854775807 -3 -1
1 2 4 8" "$out"

run 'struct point { int x; int y; };
     struct rec { char c; long l; struct point p; };
     typedef struct point point_t;
     enum color { RED, GREEN = 5, BLUE };
     inline int TWICE = 2 * BLUE;
     point_t g; self struct point t;
     BEGIN { g.x = 3; g.y = BLUE; self->t = g; self->t.x += 10; this->p = self->t;
       printf("%d %d %d %d %d %d %d %d\n", g.x, g.y, self->t.x, this->p.y, sizeof(struct rec),
         offsetof(struct rec, p), TWICE, GREEN);
       exit(0); }'
expect "structs, typedef, enum, inline, sizeof, offsetof" "3 6 13 6 24 16 12 5" "$out"

run 'BEGIN { x = 7;
       if (x > 5) { printf("big"); if (x == 7) printf(" seven"); else printf(" other"); }
       else printf("small");
       if (x < 0) printf(" neg"); else if (x < 10) { printf(" digit"); } else printf(" many");
       printf("\n"); exit(0); }'
expect "if/else, nested, with blocks" "big seven digit" "$out"

run 'int a[4]; this int l[3]; int t[string, int];
     BEGIN { i = 3; a[i] = 9; a[i]++; a[1] += 4; this->l[i - 1] = 5; t["k", 2] = 1; t["k", 2] <<= 3;
       self->h["x"]++; self->h["x"]++;
       printf("%d %d %d %d %d %d %d\n", a[3], a[1], a[0], this->l[2], this->l[0], t["k", 2], self->h["x"]);
       exit(0); }'
expect "fixed and typed arrays, ++ and op= on every lvalue" "10 4 0 5 0 8 2" "$out"

run 'string g; string m[int];
     BEGIN { g = "global"; self->s = execname; m[1] = strjoin(g, "-x"); this->l = g == "global" ? "yes" : "no";
       k[g, 2] = "two";
       printf("%s %s %s %s %s [%s]\n", g, self->s, m[1], this->l, k["global", 2], m[2]);
       exit(0); }'
expect "strings in globals, self->, this-> and arrays" "global oxtrace global-x yes two []" "$out"

run 'fbt::ksys_read:entry /pid == $target/ { self->name = execname; }
     fbt::ksys_read:return /self->name != ""/ { @n[self->name] = count(); self->name = ""; }
     END { printa("%s %@d\n", @n); }' -c "$W"
expect "thread-local strings across probes, deleted by \"\"" "oxt_workload 8000" "$out"

run '#pragma D option strsize=6
     BEGIN { s = "abcdefghij"; self->t = strjoin(s, "xyz"); printf("%s %s %d\n", s, self->t, strlen(self->t)); exit(0); }'
expect "strings truncated to strsize" "abcdef abcdef 6" "$out"

run 'int a[5]; BEGIN { i = 5; a[i] = 1; printf("not reached\n"); } BEGIN { printf("next\n"); exit(0); }'
expect_clause_error "array index out of bounds is a runtime error" "index out of bounds (5)" "next"

run 'int x;
long x;
BEGIN { exit(0); }'
if [ $rc = 1 ] && echo "$err" | grep -q -- '-e:2:6' &&
	echo "$err" | grep -q 'D_DECL_IDRED\] identifier redeclared: x'; then
	ok "redeclaration is a compile error with DTrace's tag"
else
	nok "redeclaration is a compile error with DTrace's tag" "rc=$rc" "$err"
fi

run 'BEGIN { x = (char *)arg0; }
END { x = 1 / 0; }'
if [ $rc = 1 ] && echo "$err" | grep -q -- '-e:2:15' && echo "$err" | grep -q 'D_DIV_ZERO'; then
	ok "constant division by zero is a compile error"
else
	nok "constant division by zero is a compile error" "rc=$rc" "$err"
fi

# __x64_sys_read tail-calls ksys_read, so the return address is in do_syscall_64.
run 'fbt::ksys_read:entry /pid == $target/ { @c[caller] = count(); } END { printa("%016x %@d\n", @c); }' -c "$W"
got=$(echo "$out" | while read -r a c; do
	sort /proc/kallsyms | awk -v a="$a" -v c="$c" '$1 <= a { s = $3 } END { print s, c }'
done)
expect "caller is the probed function's return address" "do_syscall_64 8000" "$got"

run 'fbt::ksys_read:entry /pid == $target/ { self->v = vtimestamp; }
     fbt::ksys_read:return /self->v/ { @back = sum(vtimestamp < self->v); @n = count(); self->v = 0; }
     END { printa("%@d ", @back); printa("%@d\n", @n); }' -c "$W"
expect "vtimestamp never goes back within a thread" "0 8000" "$out"

# linux_banner is "Linux version ...": 'L' is 0x4c, 'i' 0x69.
banner=$(awk '$3 == "linux_banner" { print $1; exit }' /proc/kallsyms)
run "#pragma D option strsize=13
     struct banner { unsigned char lo : 4, hi : 4; char i; char text[20]; };
     BEGIN { b = (struct banner *)0x$banner; printf(\"%d %d %c %s|\\n\", b->lo, b->hi, b->i, b->text); exit(0); }"
expect "bit-fields and char arrays read from kernel memory" "12 4 i nux version 6|" "$out"

tap_exit
