#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Pointers to D objects through the real module: the address of members and elements of
# clause-local struct and array variables, arithmetic, comparison, loads and stores through
# them, an array used as a pointer; accesses outside an object (alloca()'d or a variable's)
# as runtime errors through dtrace:::ERROR, the clause aborted and the run going on: TAP.
cd "$(dirname "$0")" || exit 1
. ./tap.sh

echo "TAP version 13"
plan 7

run 'struct st { int a; char c; long b[3]; };
     this struct st s;
     BEGIN {
	this->s.a = 7; this->s.b[1] = 40;
	this->pa = &this->s.a; *this->pa += 1;
	this->pb = &this->s.b[0]; this->pb[2] = 5; *(this->pb + 1) += 2;
	printf("%d %d %d %d %d %d\n", this->s.a, this->s.b[1], this->s.b[2],
	    &this->s.b[2] - this->pb, (long)&this->s.b[0] - (long)&this->s.a,
	    ((struct st *)this->pa)->b[2]);
	exit(0);
     }'
expect "address of members and elements of a clause-local struct" "8 42 5 2 8 5 rc=0" \
	"$out rc=$rc"

run 'this int a[5];
     BEGIN {
	this->a[0] = 100; this->a[3] = 400;
	this->p = this->a; this->q = &this->a[3]; this->p[1] = 200;
	printf("%d %d %d %d %d %d %d\n", this->p[0], this->a[1], *this->q, this->q > this->p,
	    this->q == this->p + 3, this->q - this->p, this->q[-1] == this->a[2]);
	exit(0);
     }'
expect "an array as a pointer, pointer comparison and arithmetic" "100 200 400 1 1 3 1 rc=0" \
	"$out rc=$rc"

# DTrace's err.AllocaOverrun: a store two ints past a one-int alloca() is an invalid
# address, reported through ERROR with the address; the next clause runs.
run 'BEGIN { x = (int *)alloca(sizeof (int)); y = x + 2; *y = 3; printf("no\n"); }
     BEGIN { printf("next\n"); exit(0); }'
expect_clause_error "a store past an alloca()'d object is an invalid address" \
	"invalid address (0x" "next"

# The same of a variable's array, read and written through a pointer, and read past it.
run 'this int a[2];
     BEGIN { this->p = &this->a[1]; this->p[1] = 1; printf("no\n"); }
     BEGIN { printf("next\n"); exit(0); }'
expect_clause_error "a store past a clause-local array is an invalid address" \
	"invalid address (0x" "next"
run 'this int a[2];
     BEGIN { this->p = this->a; trace(*(this->p - 1)); printf("no\n"); }
     BEGIN { printf("next\n"); exit(0); }'
expect_clause_error "a load before a clause-local array is an invalid address" \
	"invalid address (0x" "next"

# ERROR's arguments: the fault (DTRACEFLT_BADADDR, 1) and the address (arg5), a
# scratch address, the one the error line names when there is one.
run 'this int a[2];
     BEGIN { this->p = &this->a[0]; this->p[2] = 1; }
     ERROR { printf("%d %x\n", arg4, arg5); exit(0); }'
a=$(echo "$err" | sed -n 's/.*invalid address (0x\([0-9a-f]*\)).*/\1/p')
if [ -n "$a" ]; then
	expect "dtrace:::ERROR sees DTRACEFLT_BADADDR and the address" "1 $a" "$out"
else
	case "$out" in
	"1 "[0-9a-f]*) ok "dtrace:::ERROR sees DTRACEFLT_BADADDR and the address" ;;
	*) nok "dtrace:::ERROR sees DTRACEFLT_BADADDR and the address" "$out" "$err" ;;
	esac
fi

# A variable subscript past the array is an index error, never an access.
run 'this int a[2];
     BEGIN { this->i = 2; this->a[this->i] = 1; printf("no\n"); }
     BEGIN { printf("next\n"); exit(0); }'
expect_clause_error "a variable subscript past a clause-local array is out of bounds" \
	"index out of bounds" "next"

tap_exit
