# SPDX-License-Identifier: GPL-2.0
# oxtrace: the user front end.  Kbuild reads ./Kbuild, not this file.
#
#   make run     build everything, boot the guest, show the tool talking to the module
#   make check   host tests + style + module build + guest selftests: "N passed, N failed"
#   make vm CMD='...' [VM_FILES=dir]   run CMD as root in a fresh guest
#   make bench   oxtrace vs bpftrace in the bench guest: build/bench/results.{md,json}
#   make steptrace [TOOLS='ox bt']   one read() single-stepped under each: build/steptrace/
#   make stress  the host fuzzers and the adversarial selftests at length, with their counts
#   make module | tool | selftests | kernel | clean
#   make install [DESTDIR=] [PREFIX=/usr/local] [MODULE=0] | uninstall | man
#   make dkms-install [KVER=$(uname -r)] | dkms-uninstall   the module through DKMS
#   make deb     the Debian packages oxtrace and oxtrace-dkms in build/deb (debian/)
#
# KDIR=/path builds against another Rust-enabled kernel tree (default: the
# test kernel that scripts/kernel.sh builds and caches in ~/.cache/oxtrace).

export KDIR
SHELL := /bin/bash

.PHONY: all run check vm module tool selftests kernel setup clean bench steptrace stress \
	install uninstall man dkms-install dkms-uninstall deb

all: module tool selftests

setup:
	@scripts/setup-toolchain.sh

kernel:
	@scripts/kernel.sh test

module tool selftests:
	@scripts/build.sh $@

run:
	@scripts/vm.sh --files scripts/demo -- sh /extra/run.sh

check:
	@scripts/check.sh

# The host fuzzers (100,000 inputs each), then the guest's adversarial selftests: hours
# under TCG at worst; the timeout is a hang guard.
stress:
	@scripts/fuzz.sh
	@scripts/vm.sh --timeout 14400 -- /selftests/stress.sh

# BENCH_ARGS: NAME=VALUE settings of scripts/guest/bench-run.sh (ROUNDS=5 ...).
bench:
	@scripts/bench.sh $(BENCH_ARGS)

# OXPROG, BTPROG, SKIP and N (scripts/steptrace.sh) pass as make passes any variable
# set on its command line or in its environment.
steptrace:
	@scripts/steptrace.sh $(TOOLS)

# Documentation/install.rst: the layout, and KDIR= for the kernel the module is for.
export DESTDIR PREFIX MODULE KVER
install uninstall man:
	@scripts/install.sh $@

dkms-install dkms-uninstall:
	@scripts/dkms.sh $(@:dkms-%=%)

deb:
	@scripts/deb.sh build

# CMD and VM_FILES reach the script through the environment: no quoting issues.
override CMD := $(value CMD)
export CMD VM_FILES
vm:
	@if [ -z "$$CMD" ]; then echo "usage: make vm CMD='...' [VM_FILES=dir]" >&2; exit 2; fi
	@scripts/vm.sh $${VM_FILES:+--files "$$VM_FILES"} -- "$$CMD"

clean:
	rm -rf build target
	$(MAKE) -C selftests/oxtrace OUTPUT=$(CURDIR)/build/selftests clean
	find . -path ./target -prune -o \( -name '*.o' -o -name '*.ko' -o -name '*.mod' \
		-o -name '*.mod.c' -o -name '.*.cmd' -o -name '*.d' -o -name '*.rmeta' \) -print0 | xargs -0 rm -f
	rm -f modules.order Module.symvers
