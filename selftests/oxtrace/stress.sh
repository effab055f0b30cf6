#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# make stress: the adversarial selftests at length (tens of thousands of
# operations each), with their counts; TAP like run_tests.sh.
cd "$(dirname "$0")" || exit 1
export OXT_STRESS=1
rc=0
for t in ./ioctl_fuzz ./lifecycle_test ./attach_test.sh ./uattack_test.sh; do
	echo "# stress: $t"
	"$t" || rc=1
done
exit $rc
