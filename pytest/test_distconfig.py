"""The test kernels parse with the distribution's partition parsers (issue 14).

With scanning on, every parser the kernel has reads every disc; a test
kernel with fewer parsers than Debian's would leave most of that surface
untested. Compared with Debian's own linux-config-<ver> (a `host` test: it
downloads the package and reads block/partitions/Kconfig of the extracted
tree); the reading itself is unit-tested on a .deb built here.
"""
from __future__ import annotations

import lzma
import subprocess

import pytest

from conftest import KERNELS
from harness import distconfig, kernel
from harness.kconfig import Kconfig
from harness.errors import SrpartError

# Off in Debian, on in the debug kernels so that the fuzzer reaches them too.
DEBUG_ONLY = {"CONFIG_SYSV68_PARTITION", "CONFIG_AIX_PARTITION"}


def _enabled_in(variant: str, names: list[str]) -> set[str]:
    return distconfig.enabled(kernel.requested_config(variant), names)


@pytest.mark.host
@pytest.mark.parametrize("k", KERNELS)
def test_plain_kernels_have_exactly_debians_parsers(k):
    """The .config each booted variant was built with (build/kernels/<k>/<v>/config),
    not the fragment that asked for it: olddefconfig may drop what a fragment
    asks. (Seen failing with CONFIG_KARMA_PARTITION removed from a built config.)"""
    names = distconfig.parser_symbols(k)
    debian = distconfig.enabled(distconfig.debian(k), names)
    assert "CONFIG_EFI_PARTITION" in debian and len(debian) > 10, "not a distribution config?"
    for v in kernel.tested(k):
        ours = distconfig.enabled(Kconfig.read(kernel.built(k, v).config), names)
        assert (sorted(ours - debian), sorted(debian - ours)) == ([], []), \
            f"{k} {v}: (only in the built kernel, only in Debian's config)"


@pytest.mark.host
@pytest.mark.parametrize("k", KERNELS)
def test_the_debug_fragment_adds_only_the_parsers_debian_leaves_off(k):
    """The sanitizer kernel is built on demand (make debug-kernel), not by make
    check: this reads what its fragments ask for; kconfig.configure() fails its
    build naming any option olddefconfig drops."""
    names = distconfig.parser_symbols(k)
    debian = distconfig.enabled(distconfig.debian(k), names)
    assert _enabled_in("srpart-debug", names) == debian | DEBUG_ONLY
    assert not DEBUG_ONLY & debian, "Debian enables one of them now: move it to the fragment"


def test_kconfig_symbols_are_read_from_config_and_menuconfig():
    text = ("menuconfig PARTITION_ADVANCED\n\tbool \"x\"\nconfig ACORN_PARTITION\n"
            "\tbool\n\tdepends on PARTITION_ADVANCED\n  config  KARMA_PARTITION \n"
            "\thelp\n\t  config in help text is not an entry\n")
    assert distconfig.symbols_defined(text) == [
        "CONFIG_PARTITION_ADVANCED", "CONFIG_ACORN_PARTITION", "CONFIG_KARMA_PARTITION"]


def _deb(tmp_path, files):
    root = tmp_path / "root"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        "Package: linux-config-9.9\nVersion: 1\nArchitecture: all\n"
        "Maintainer: t <t@t>\nDescription: t\n")
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    out = tmp_path / "linux-config-9.9_1_all.deb"
    subprocess.run(["dpkg-deb", "-b", "-Zgzip", str(root), str(out)], check=True,
                   capture_output=True)
    return out


def test_config_is_read_from_the_amd64_flavour_in_the_deb(tmp_path):
    cfg = b"#\n# comment\n#\nCONFIG_EFI_PARTITION=y\n# CONFIG_SYSV68_PARTITION is not set\n\n"
    other = b"CONFIG_EFI_PARTITION=n\n"
    deb = _deb(tmp_path, {
        "usr/src/linux-config-9.9/config.amd64_none_amd64.xz": lzma.compress(cfg),
        "usr/src/linux-config-9.9/config.amd64_rt_amd64.xz": lzma.compress(other)})
    c = distconfig.config_from_deb(deb, "9.9")
    assert c.options == {"CONFIG_EFI_PARTITION": "y", "CONFIG_SYSV68_PARTITION": "n"}
    assert distconfig.enabled(c, ["CONFIG_EFI_PARTITION", "CONFIG_SYSV68_PARTITION",
                                  "CONFIG_SUN_PARTITION"]) == {"CONFIG_EFI_PARTITION"}


def test_a_deb_without_the_flavour_is_one_clear_error(tmp_path):
    deb = _deb(tmp_path, {"usr/src/linux-config-9.9/config.arm64_none_arm64.xz":
                          lzma.compress(b"CONFIG_X=y\n")})
    with pytest.raises(SrpartError, match=r"holds no \./usr/src/linux-config-9\.9/"
                                          r"config\.amd64_none_amd64\.xz"):
        distconfig.config_from_deb(deb, "9.9")
