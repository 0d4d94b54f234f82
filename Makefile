# srpart: partitioned CDs on Linux's sr driver, proven in QEMU.
# `make demo` and `make check` install what they need (as root) and build
# everything from Debian's linux-source tarball. See README.md.

PY      := /usr/bin/python3
SRPART  := $(PY) ./srpart
KERNEL  ?= 6.1
KERNELS ?= 6.1 6.12
PYTEST  := $(PY) -m pytest -p no:cacheprovider
XDIST   ?= -n auto --dist loadgroup
JUNIT   ?= build/junit.xml

PHONY_EXTRA := debug-kernel fuzz-images fuzz stress
PHONY_EXTRA += dkms
.PHONY: $(PHONY_EXTRA) help deps kernels fixtures demo check unit matrix bench checkpatch series-check media-report abi-report userspace-report clean distclean

help:
	@echo "make demo        boot the patched $(KERNEL) kernel with two partitioned CDs, read sr0p1"
	@echo "make check       build everything, series-check, and the whole pytest matrix on $(KERNELS) (JUnit: $(JUNIT))"
	@echo "make unit        the fast tests that boot no VM"
	@echo "make dkms        build/dkms/srpart-dkms_<v>_all.deb (lintian-clean), Debian's 6.1/6.12 images, dkms's module"
	@echo "make bench       measure build, boot, media-change, read, memory and matrix figures; write docs/performance.md"
	@echo "make fuzz        SEED=1 COUNT=300 BLOCKS='2048 512 4096': malformed tables under the sanitizer kernel (KASAN, UBSAN, lockdep, kmemleak)"
	@echo "make stress      SWAPS=200 CYCLES=30: media swaps under readers, hot-plug under a mount, sanitizer kernel"
	@echo "make checkpatch  git am the series onto a pristine tree and run checkpatch --strict"
	@echo "make series-check  checkpatch, a W=1 build of what the series touches after every patch, the cover-letter checks"
	@echo "make abi-report  regenerate docs/abi-impact.md from real boots (1, 2, 4, 8 drives)"
	@echo "make media-report  regenerate docs/media.md from four real boots (before/after the series, DKMS on Debian's kernel)"
	@echo "make userspace-report  regenerate docs/userspace.md: Debian 12's udev and util-linux on every disc kind"
	@echo "make clean       remove all the targets make but the extracted kernel trees and object trees"
	@echo "make distclean   remove build/ entirely"

deps:
	@sh harness/deps.sh

kernels: deps
	for k in $(KERNELS); do $(SRPART) build --kernel $$k --variant tested || exit 1; done

fixtures: deps
	$(SRPART) fixtures --drives 8

demo: deps
	$(SRPART) demo --kernel $(KERNEL)

check: kernels fixtures series-check dkms
	SRPART_KERNELS="$(KERNELS)" $(PYTEST) $(XDIST) --junitxml=$(JUNIT) pytest

unit: deps
	$(PYTEST) -m "not vm and not host" pytest

matrix: kernels fixtures
	SRPART_KERNELS="$(KERNELS)" $(PYTEST) $(XDIST) -m vm pytest

bench: kernels fixtures
	$(PY) -m harness.bench --kernel $(KERNEL) --doc docs/performance.md

checkpatch: deps
	for k in $(KERNELS); do $(PY) -m harness.series --kernel $$k || exit 1; done

series-check: deps
	for k in $(KERNELS); do $(PY) -m harness.series --kernel $$k --build-each || exit 1; done

dkms: kernels
	$(PY) -m harness.dkms

media-report: kernels fixtures dkms
	$(PY) -m harness.media_report --kernel $(KERNEL)

abi-report: kernels fixtures
	$(PY) -m harness.abi_report

userspace-report: kernels fixtures
	$(PY) -m harness.userspace_report --kernel $(KERNEL)

# Issue 6: the sanitizer kernel (own object tree, not part of `make check`),
# malformed images and churn. `make check` runs short versions of both on the
# plain kernels (pytest/test_fuzz.py, pytest/test_stress.py).
debug-kernel: deps
	$(SRPART) build --kernel $(KERNEL) --variant srpart-debug

# COUNT images at each block size: 2048 on scsi-cd (sr), 512 and 4096 on
# scsi-hd against the unpatched kernel (harness/fuzz_check.py)
SEED  ?= 1
COUNT ?= 300
FIRST ?= 0
BLOCKS ?= 2048 512 4096
KINDS ?= all
FUZZ_VARIANT ?= srpart-debug
fuzz: deps
	$(SRPART) build --kernel $(KERNEL) --variant $(FUZZ_VARIANT)
	rc=0; for b in $(BLOCKS); do $(PY) -m harness.fuzz_run --kernel $(KERNEL) \
	  --variant $(FUZZ_VARIANT) --seed $(SEED) --count $(COUNT) --first $(FIRST) --block $$b --kinds $(KINDS) \
	  || rc=1; done; exit $$rc

SWAPS  ?= 200
CYCLES ?= 30
STRESS_VARIANT ?= srpart-debug
stress: deps fixtures
	$(SRPART) build --kernel $(KERNEL) --variant $(STRESS_VARIANT)
	$(PY) -m harness.stress_run --kernel $(KERNEL) --variant $(STRESS_VARIANT) --swaps $(SWAPS) --cycles $(CYCLES)

fuzz-images:
	$(PY) -c 'import sys; from pathlib import Path; from fixtures import fuzz; \
	c = fuzz.generate($(SEED), $(COUNT), Path("build/fuzz/$(SEED)")); \
	print(f"srpart: {len(c)} images for seed $(SEED) in build/fuzz/$(SEED)")'

# clean: everything the targets make (whatever its name under build/), except the
# extracted kernel trees and object trees, which take ~6 min a kernel to remake;
# distclean: those too.
clean:
	find build -mindepth 1 -maxdepth 1 ! -name src ! -name obj -exec rm -rf {} + 2>/dev/null || true
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf build
