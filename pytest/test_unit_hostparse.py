"""harness.hostparse.parse on recorded output of the host-built parser."""
from harness import hostparse

CLEAN = "result 1\npart 1 1024 2048\npart 2 4096 4096\nline sysV68: sr0(s64) sr01(s0) sr02(s1)\n"
# recorded from the pristine 6.1 sysv68.c on fuzz.sysv68_table_ends_a_page (trimmed)
ASAN = """=================================================================
==16988==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x621000003900 at pc 0x559885b93538 bp 0x7ffef38e14e0 sp 0x7ffef38e14d8
READ of size 4 at 0x621000003900 thread T0
    #0 0x559885b93537 in sysv68_partition /tmp/hp/sysv68.c:83
0x621000003900 is located 0 bytes to the right of 4096-byte region [0x621000002900,0x621000003900)
SUMMARY: AddressSanitizer: heap-buffer-overflow /tmp/hp/sysv68.c:83 in sysv68_partition
==16988==ABORTING
"""
UBSAN = "sysv68.c:80:2: runtime error: shift exponent 40 is too large for 32-bit type 'int'\n"


def test_a_clean_run_gives_result_parts_and_line():
    r = hostparse.parse(0, CLEAN, "")
    assert (r.rc, r.result, r.sanitizer) == (0, 1, "")
    assert r.parts == [hostparse.HostPart(1, 1024, 2048), hostparse.HostPart(2, 4096, 4096)]
    assert r.line == "sysV68: sr0(s64) sr01(s0) sr02(s1)"


def test_an_asan_report_is_the_first_error_line_and_no_result():
    r = hostparse.parse(1, "", ASAN)
    assert r.result is None and r.parts == []
    assert r.sanitizer.startswith("ERROR: AddressSanitizer: heap-buffer-overflow on address")


def test_a_ubsan_report_counts_even_when_the_parser_returned():
    r = hostparse.parse(1, "result 0\nline \n", UBSAN)
    assert r.result == 0
    assert r.sanitizer == "runtime error: shift exponent 40 is too large for 32-bit type 'int'"


def test_negative_results_parse():
    assert hostparse.parse(0, "result -1\nline \n", "").result == -1


def test_a_gcc_failure_is_named_by_its_error_line():
    log = ("In file included from ldm.c:19:\n"
           "ldm.h:18:10: fatal error: linux/unaligned.h: No such file or directory\n"
           "compilation terminated.\n")
    assert hostparse.first_error(log) == \
        "ldm.h:18:10: fatal error: linux/unaligned.h: No such file or directory"
    assert hostparse.first_error("") == "no output"
