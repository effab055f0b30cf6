#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Runs every oxtrace selftest in the guest; each prints TAP.
cd "$(dirname "$0")" || exit 1
rc=0
for t in ./device_test ./dynvar_test ./tool_test.sh ./trace_test.sh ./agg_test.sh ./json_test.sh \
	./oxt-loadtest ./pt_abi_test ./pt_test.sh "./oxt-doctest tutorial.rst" ./ioctl_fuzz ./lifecycle_test; do
	echo "# selftest: $t"
	$t || rc=1
done
exit $rc
