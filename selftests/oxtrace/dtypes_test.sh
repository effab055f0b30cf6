#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# D's integer semantics and top-level declarations through the real module (issue 38):
# 64-bit unsigned values in full, the types of constants, C's conversions, promotions,
# casts and comparisons, strings against NULL, enums, typedefs, every declaration form,
# anonymous structs and unions, bit-fields, and DTrace's errors for wrong ones. TAP, exact output; every program ends in BEGIN.
cd "$(dirname "$0")" || exit 1
. ./tap.sh

echo "TAP version 13"
plan 12

# expect_error NAME TEXT: the last `run` exited 1 and its stderr holds TEXT, the message
# and the line under it (its position), as one string.
expect_error() {
	case "$err" in
	*"$2"*) if [ "$rc" = 1 ]; then ok "$1"; else nok "$1" "rc=$rc" "$err"; fi ;;
	*) nok "$1" "rc=$rc" "want: $2" "got: $err" ;;
	esac
}

run 'BEGIN { trace((uint64_t)-1); printf("|"); trace(-1ul);
       printf("|%u|%d|%x|%d|%d\n", (uint64_t)-1, (uint64_t)-1, (uint64_t)-1, (uint)-12345,
         (int)-12345);
       exit(0); }'
expect "uint64_t -1 in full: trace(), printf %u %d %x; %d of an unsigned value" \
	"18446744073709551615|18446744073709551615|18446744073709551615|18446744073709551615|ffffffffffffffff|4294954951|-12345 rc=0" \
	"$out rc=$rc"

run 'BEGIN {
       printf("%d %d %d %d %d %d %d %d\n", sizeof(1), sizeof(2147483648), sizeof(1L),
         sizeof(1U), sizeof(0xffffffff), sizeof(1U + 1L), sizeof((char)1 + (char)1), 1LL << 32);
       printf("%d %d %d %d %d %d %d\n", (uint8_t)1 - 2, 1U - 2, 1L - 2U, -1 >> 1, -1U >> 1,
         -7 / 2, (uint8_t)254 + (char)3);
       exit(0); }'
expect "constants typed by suffix and base; conversions by rank, no promotion to int" \
	"4 8 8 4 4 8 1 4294967296
-1 4294967295 -1 -1 2147483647 -3 1 rc=0" "$out rc=$rc"

run 'BEGIN {
       printf("%d %d %d %d %d %d\n", (char)200, (uint8_t)-1, (short)70000, (int)0x1ffffffff,
         (int64_t)(uint32_t)-1, (uint64_t)(char)-1);
       printf("%d %d %d %d %d\n", (uint64_t)-1 > 0, -1 < (unsigned)1, -1 < 1, -1L < 1U, 0U >= -1);
       exit(0); }'
expect "casts truncate and sign-extend; signed and unsigned comparisons" \
	"-56 255 4464 -1 4294967295 18446744073709551615
1 0 1 1 0 rc=0" "$out rc=$rc"

run 'string t;
     BEGIN { s = "abc"; printf("%d %d %d\n", s == NULL, s != NULL, NULL < s);
       t = NULL; printf("%d [%s] [%s]\n", t == NULL, t, s == "abc" ? NULL : "x"); exit(0); }'
expect "strings compared with and assigned NULL" "0 1 1
1 [] [] rc=0" "$out rc=$rc"

run 'BEGIN { @u[(uint64_t)-1] = count(); @s[(int64_t)-1] = count();
       printa("%d %@d\n", @u); printa("%d %@d\n", @s); exit(0); }'
expect "uint64_t aggregation keys print unsigned" "18446744073709551615 1
-1 1 rc=0" "$out rc=$rc"

run 'enum color { RED, GREEN = 5, BLUE, INDIGO = -2, VIOLET };
     typedef enum color color_t;
     typedef enum { LOW = 1, HIGH = 10 } level_t;
     color_t c; level_t l;
     BEGIN { c = BLUE; l = HIGH;
       printf("%d %d %d %d %d %d %d\n", RED, GREEN, c, INDIGO, VIOLET, l, sizeof(level_t));
       printf("%s %d\n", c == BLUE ? "blue" : "other", (enum color)6 == BLUE); exit(0); }'
expect "enums: implicit and explicit values, typedefs, comparisons" "0 5 6 -2 -1 10 4
blue 1 rc=0" "$out rc=$rc"

run 'int x; self int y; this int z; int a[5];
     inline int N = 3; inline int M = N * 2 + 1; inline string NAME = "oxtrace";
     BEGIN { x = N; self->y = M; this->z = x + self->y; a[4] = this->z;
       printf("%d %d %d %d %d %s %d\n", x, self->y, this->z, a[4], a[0], NAME, sizeof(a));
       exit(0); }'
expect "every top-level declaration form" "3 7 10 10 0 oxtrace 20 rc=0" "$out rc=$rc"

run 'struct { int a; long b; } g;
     typedef struct { char c; int i; } ci_t;
     struct outer { int k; struct { short s; char t; } in; union { int i; char c[8]; } u;
       struct { int z; } arr[3]; };
     ci_t x; struct outer o;
     BEGIN { g.a = 1; g.b = 2; x.c = 97; x.i = 7; o.in.s = 3; o.u.i = 5; o.arr[2].z = 9;
       this->p = (ci_t *)alloca(sizeof(ci_t)); this->p->i = 42;
       printf("%d %d %d %d %d %d %d\n", g.a, g.b, sizeof(g), x.c, x.i, sizeof(ci_t),
         offsetof(ci_t, i));
       printf("%d %d %d %d %d %d %d %d\n", o.in.s, o.u.i, o.arr[2].z, sizeof(struct outer),
         offsetof(struct outer, u), offsetof(struct outer, arr), sizeof(o.in), this->p->i);
       exit(0); }'
expect "anonymous structs and unions: declarations, typedefs, members, arrays, casts" \
	"1 2 16 97 7 8 4
3 5 9 28 8 16 4 42 rc=0" "$out rc=$rc"

run 'struct s { char a : 3; int : 0; char b : 2; unsigned : 4; char c : 1; };
     self struct { int a : 3; unsigned b : 5; } bf;
     BEGIN { self->bf.a = 3; self->bf.b = 31; self->bf.b++;
       printf("%d %d %d\n", sizeof(struct s), self->bf.a, self->bf.b); exit(0); }'
expect "bit-fields: unnamed ones, GCC's layout, values narrowed to their width" "5 3 0 rc=0" \
	"$out rc=$rc"

run 'enum colors { RED, GREEN, GREEN = 2 };
BEGIN { exit(0); }'
expect_error "an enumerator twice in one enum: D_UNKNOWN at its line:column" \
	"[D_UNKNOWN] failed to define enumerator 'GREEN': Duplicate member or variable name
 --> -e:1:27"

run 'enum e { A };
enum e { B };
BEGIN { exit(0); }'
expect_error "an enum defined twice: D_DECL_TYPERED" "[D_DECL_TYPERED] type redeclared: enum e
 --> -e:2:10"

run 'inline int i = "i am a string";'
expect_error "an inline of the wrong type, in a file of declarations only: D_OP_INCOMPAT" \
	"[D_OP_INCOMPAT] inline i definition uses incompatible types: \"int\" = \"string\"
 --> -e:1:16"

tap_exit
