#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Runs every oxtrace selftest in the guest; each prints TAP.
cd "$(dirname "$0")" || exit 1
rc=0
for t in ./device_test ./dynvar_test ./tool_test.sh ./trace_test.sh ./agg_test.sh ./exporter_test.sh ./lang_test.sh \
	./json_test.sh ./provider_test.sh ./subr_test.sh ./print_test.sh ./stack_test.sh \
	./oxt-loadtest ./pt_abi_test ./pt_test.sh "./oxt-doctest tutorial.rst" \
	./ioctl_fuzz ./lifecycle_test ./probesafe_test.sh ./attach_test.sh ./ustack_test.sh \
	./dlang_test.sh ./dtypes_test.sh ./btf_test.sh ./xlate_test.sh ./mem_test.sh ./dptr_test.sh ./uprobe_test ./pid_test.sh \
	./usdt_test.sh ./stable_test.sh ./oneliners_test.sh ./fbt_module_test.sh ./fbt_scale_test.sh \
	./uattack_test.sh ./options_test.sh; do
	echo "# selftest: $t"
	t0=$(date +%s)
	$t || rc=1
	# Where a slow run's time went (a TAP comment: no test's result).
	echo "# $t: $(($(date +%s) - t0)) s"
done
exit $rc
