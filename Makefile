# srpart: partitioned CDs on Linux's sr driver, proven in QEMU.
# `make demo` and `make check` install what they need (as root) and build
# everything from Debian's linux-source tarball. See README.md.

PY      := /usr/bin/python3
SRPART  := $(PY) ./srpart
KERNEL  ?= 6.1
PYTEST  := $(PY) -m pytest -p no:cacheprovider
XDIST   ?= -n auto --dist loadgroup
JUNIT   ?= build/junit.xml

.PHONY: help deps kernels fixtures demo check unit matrix bench checkpatch media-report clean distclean

help:
	@echo "make demo        boot the patched $(KERNEL) kernel with two partitioned CDs, read sr0p1"
	@echo "make check       build everything and run the whole pytest matrix (JUnit: $(JUNIT))"
	@echo "make unit        the fast tests that boot no VM"
	@echo "make bench       print build, boot and matrix timings"
	@echo "make checkpatch  git am the series onto a pristine tree and run checkpatch --strict"
	@echo "make media-report  regenerate docs/media.md from three real boots (before/after the series)"
	@echo "make clean       remove build/ except the extracted kernel tree and object tree"

deps:
	@sh harness/deps.sh

kernels: deps
	$(SRPART) build --kernel $(KERNEL)

fixtures: deps
	$(SRPART) fixtures --drives 8

demo: deps
	$(SRPART) demo --kernel $(KERNEL)

check: kernels fixtures checkpatch
	$(PYTEST) $(XDIST) --junitxml=$(JUNIT) pytest

unit: deps
	$(PYTEST) -m "not vm" pytest

matrix: kernels fixtures
	$(PYTEST) $(XDIST) -m vm pytest

bench: kernels fixtures
	$(PY) -m harness.bench --kernel $(KERNEL)

checkpatch: deps
	$(PY) -m harness.series --kernel $(KERNEL)

media-report: kernels fixtures
	$(PY) -m harness.media_report --kernel $(KERNEL)

clean:
	rm -rf build/logs build/fixtures build/initramfs build/kernels build/junit.xml build/locks

distclean:
	rm -rf build
