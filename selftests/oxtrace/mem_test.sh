#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Scratch memory through the real module: alloca, bcopy, copyin, copyinto, copyinstr, stores
# through D pointers, uregs[], and their runtime faults, with oxt_mem's known user memory: TAP.
cd "$(dirname "$0")" || exit 1
. ./tap.sh
REC='struct oxt_rec { int a; short b; char name[6]; long c; };'
W="./oxt_mem 100"

echo "TAP version 13"
plan 13

# The DTrace idiom: a user struct copied in and cast, member by member.
run "$REC"'
     syscall::write:entry /pid == $target && arg2 == sizeof (struct oxt_rec)/ {
	this->r = (struct oxt_rec *)copyin(arg1, sizeof (struct oxt_rec));
	@n[this->r->b, stringof(this->r->name), this->r->c] = count();
	@s = sum(((struct oxt_rec *)copyin(arg1, sizeof (struct oxt_rec)))->a);
     }
     END { printa("%d %s %x %@d\n", @n); printa("%@d\n", @s); }' -c "$W"
expect "copyin of a user struct, members read through a cast" \
	"-2 oxt 1122334455667788 100 4950" "$(echo $out)"

run 'syscall::write:entry /pid == $target && arg2 == 9/ { printf("%s|%s\n", copyinstr(arg1),
	copyinstr(arg1, 3)); }' -c "$W"
expect "copyinstr of a user string, whole and bounded" "oxt-path|oxt" "$out"

# Stores into scratch, with ++, -- and compound assignment, then read back.
run "$REC"'
     syscall::write:entry /pid == $target && arg2 == sizeof (struct oxt_rec)/ {
	this->r = (struct oxt_rec *)copyin(arg1, sizeof (struct oxt_rec));
	this->r->a *= 2; this->r->b--; ++this->r->c; this->r->name[0] = 0x4f;
	@[this->r->b, stringof(this->r->name), this->r->c] = sum(this->r->a);
     }
     END { printa("%d %s %x %@d\n", @); }' -c "$W"
expect "stores, ++, -- and compound assignment through a scratch pointer" \
	"-3 Oxt 1122334455667789 9900" "$out"

# Strings stored into a char[6] member (at most 5 bytes and a NUL, like DTrace) and into a
# string member of a D struct in scratch (strsize bytes of it: 256 would not fit the
# default scratchsize next to the two records).
run "$REC"'
     #pragma D option strsize=64
     struct ent { int id; string name; };
     syscall::write:entry /pid == $target && arg2 == sizeof (struct oxt_rec)/ {
	this->r = (struct oxt_rec *)copyin(arg1, sizeof (struct oxt_rec));
	this->r->name = execname;
	this->q = (struct oxt_rec *)alloca(sizeof (struct oxt_rec));
	this->q->name = "ab";
	this->e = (struct ent *)alloca(sizeof (struct ent));
	this->e->name = strjoin(execname, "!");
	@[this->r->b, this->r->name, this->r->c, stringof(this->q->name), this->e->name] = count();
     }
     END { printa("%d %s %x %s %s %@d\n", @); }' -c "$W"
expect "strings stored into char[N] and string members through scratch pointers" \
	"-2 oxt_m 1122334455667788 ab oxt_mem! 100" "$(echo $out)"

# A whole struct copied between scratch pointers, a bit-field stored through one, and the
# distance between two pointers in elements.
run "$REC"'
     struct bits { unsigned int lo : 3; int mid : 5; unsigned int hi : 24; };
     syscall::write:entry /pid == $target && arg2 == sizeof (struct oxt_rec)/ {
	this->r = (struct oxt_rec *)copyin(arg1, sizeof (struct oxt_rec));
	this->q = (struct oxt_rec *)alloca(2 * sizeof (struct oxt_rec));
	this->q[1] = *this->r;
	this->bf = (struct bits *)alloca(sizeof (struct bits));
	*(uint32_t *)this->bf = 0xffffffff;
	this->bf->mid = -2; this->bf->lo = 4;
	@[this->q[1].b, stringof(this->q[1].name), this->bf->lo, this->bf->mid, this->bf->hi,
	  &this->q[1] - this->q, (char *)&this->q[1] - (char *)this->q] = count();
     }
     END { printa("%d %s %d %d %x %d %d %@d\n", @); }' -c "$W"
expect "whole struct and bit-field stores through scratch pointers, ptr - ptr" \
	"-2 oxt 4 -2 ffffff 1 24 100" "$out"

# Floats of user memory: loaded through a cast pointer and a struct's members, formatted by
# printf() as C would (the float 0.1f promoted to double), with no arithmetic in D.
run 'struct oxt_fl { float f; double d; long double ld; };
     syscall::write:entry /pid == $target && arg2 == sizeof (struct oxt_fl)/ {
	this->p = (struct oxt_fl *)copyin(arg1, sizeof (struct oxt_fl));
	printf("%.10f %e %g %5.1Lf|%G\n", this->p->f, this->p->d, this->p->ld, this->p->ld,
	    *(float *)copyin(arg1, sizeof (float)));
     }' -c "$W"
expect "floats of user memory formatted by printf" \
	"0.1000000015 -2.250000e+00 3   3.0|0.1" "$out"

run 'syscall::write:entry /pid == $target && arg2 == 9/ {
	this->b = (char *)alloca(16);
	copyinto(arg1, 9, this->b);
	this->c = (char *)alloca(16);
	bcopy(this->b, this->c, 9);
	this->c[3] = 0x2b;
	printf("%s %s\n", stringof(this->b), stringof(this->c));
     }' -c "$W"
expect "copyinto and bcopy fill alloca memory" "oxt-path oxt+path" "$out"

# bcopy from kernel memory: the task's comm, at a BTF offset.
run 'syscall::write:entry /pid == $target && arg2 == 9/ {
	this->p = (char *)alloca(16);
	bcopy((char *)&curthread->comm, this->p, 16);
	printf("%s\n", stringof(this->p));
     }' -c "$W"
expect "bcopy of kernel memory into scratch" "oxt_mem" "$out"

# A fault: copyin of an unmapped user address is a runtime error, counted; the run goes on.
run 'syscall::write:entry /pid == $target && arg2 == 4/ { trace((long)copyin(arg1, 4)); }
     syscall::write:entry /pid == $target && arg2 == 9/ { printf("before\n"); }
     END { printf("end\n"); }' -c "$W"
if [ "$rc" = 0 ] && [ "$(echo $out)" = "before end" ] &&
	echo "$err" | grep -q "invalid address (0x10)" &&
	echo "$err" | grep -q "oxtrace: 1 errors"; then
	ok "copyin of a bad user address is a counted runtime error"
else
	nok "copyin of a bad user address is a counted runtime error" "rc=$rc" "$out" "$err"
fi

# Exhaustion: 200 + 200 bytes of the default 256; with scratchsize=1k it fits.
run 'BEGIN { this->a = alloca(200); this->b = alloca(200); printf("no\n"); }
     BEGIN { printf("next\n"); exit(0); }'
if [ "$rc" = 0 ] && [ "$out" = "next" ] && echo "$err" | grep -q "out of scratch space" &&
	echo "$err" | grep -q "oxtrace: 1 errors"; then
	ok "alloca past scratchsize is out of scratch space"
else
	nok "alloca past scratchsize is out of scratch space" "rc=$rc" "$out" "$err"
fi
run 'BEGIN { this->a = alloca(200); this->b = (char *)alloca(800); this->b[799] = 7;
	printf("%d\n", this->b[799]); exit(0); }' -x scratchsize=1k
expect "scratchsize raises the bound" "7 rc=0" "$out rc=$rc"

# A store through a pointer that is not scratch: invalid address, never a kernel write.
run 'BEGIN { this->p = (long *)curthread; *this->p = 1; printf("no\n"); }
     BEGIN { printf("ok\n"); exit(0); }'
if [ "$rc" = 0 ] && [ "$out" = "ok" ] && echo "$err" | grep -q "invalid address"; then
	ok "a store outside scratch is an invalid address"
else
	nok "a store outside scratch is an invalid address" "rc=$rc" "$out" "$err"
fi

# uregs[]: at a write's entry the saved registers hold the call's number and arguments.
run 'syscall::write:entry /pid == $target && arg2 == 9/ {
	printf("%d %d %d %d\n", uregs[R_ERR], uregs[R_RDI] == arg0, uregs[R_RDX], uregs[R_PC] != 0);
     }' -c "$W"
expect "uregs[] of the current thread" "1 1 9 1" "$out"

tap_exit
