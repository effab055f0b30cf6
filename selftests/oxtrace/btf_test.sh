#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Kernel types from the kernel's BTF (/sys/kernel/btf/vmlinux): typed fbt args[], member
# chains, casts, curthread, offsetof, and the errors, against the real module with
# oxt_workload's known calls: TAP.
cd "$(dirname "$0")" || exit 1
. ./tap.sh
# 4 threads x 2000 reads of /dev/zero, of 1..8 bytes: 36000 bytes.
W="./oxt_workload read 4 2000"

echo "TAP version 13"
echo "1..9"

if [ -r /sys/kernel/btf/vmlinux ]; then ok "the kernel exports its BTF"; else
	nok "the kernel exports its BTF" "no /sys/kernel/btf/vmlinux (CONFIG_DEBUG_INFO_BTF)"; fi

run 'fbt::vfs_read:entry /pid == $target/ {
       @[stringof(args[0]->f_path.dentry->d_name.name)] = count(); }
     END { printa("%s %@d\n", @); }' -c "$W"
expect "member chain from args[0] (struct file *) to the file's name" "zero 8000" \
	"$(echo "$out" | grep '^zero ')"

run 'fbt::vfs_read:entry /pid == $target/ {
       @[stringof(((struct file *)arg0)->f_path.dentry->d_name.name)] = count(); }
     END { printa("%s %@d\n", @); }' -c "$W"
expect "the same chain through a cast of arg0" "zero 8000" "$(echo "$out" | grep '^zero ')"

run 'fbt::vfs_read:entry /pid == $target && args[0]->f_path.dentry->d_name.len == 4/ {
       @n = count(); @s = sum(args[2]); @same = sum(args[2] == arg2); }
     END { printa("%@d\n", @n); printa("%@d\n", @s); printa("%@d\n", @same); }' -c "$W"
expect "args[2] is size_t count" "8000 36000 8000" "$(echo $out)"

run 'fbt::vfs_read:return /pid == $target/ { @s = sum(args[1] > 0 ? args[1] : 0); }
     END { printa("%@d\n", @s); }' -c "$W"
expect "args[1] on return: the ssize_t return value" "36000" "$out"

run 'fbt::vfs_read:entry /pid == $target && args[0]->f_path.dentry->d_name.len == 4/ {
       @tid = sum(curthread->pid == tid); @pid = sum(curthread->tgid == pid);
       @[stringof(curthread->comm)] = count(); @n = count(); }
     END { printa("%@d\n", @tid); printa("%@d\n", @pid); printa("%@d\n", @n);
       printa("%s %@d\n", @); }' -c "$W"
expect "curthread->pid == tid, ->tgid == pid, ->comm" "8000 8000 8000 oxt_workload 8000" \
	"$(echo $out)"

run 'BEGIN { printf("%d %d\n",
       (uint64_t)&curthread->tgid - (uint64_t)curthread == offsetof(struct task_struct, tgid),
       sizeof(struct task_struct) > offsetof(struct task_struct, comm)); exit(0); }'
expect "offsetof and sizeof of struct task_struct" "1 1" "$out"

run 'fbt::vfs_read:entry { trace(args[0]->f_paht); }'
if echo "$err" | grep -qF -- "--> -e:1:29" && [ "$(echo "$err" | tail -n 1 | tr -d ' |')" = "^^^^^^^^^^^^^^^" ]; then
	expect_fail "a misspelled member names the type and the member, with a caret" \
		"[D_TYPE_MEMBER] struct file has no member 'f_paht' (did you mean 'f_path'"
else
	nok "a misspelled member names the type and the member, with a caret" "$err"
fi

run 'BEGIN { trace(sizeof(struct no_such_struct)); }'
expect_fail "an unknown struct is an error" "[D_TYPE_ERR] struct no_such_struct is not defined"

tap_exit
