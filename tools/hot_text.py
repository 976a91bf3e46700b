#!/usr/bin/env python3
"""Write cmake/hot-text.ld, the linker script that puts the functions small
programs run together at the start of libsluice's text (CMakeLists.txt
links the shared library with it; the objects are built with
-ffunction-sections, so each function is a section .text.NAME).

    python3 tools/hot_text.py --so LIB.so [--lib libsluice] CALLGRIND.OUT ... > cmake/hot-text.ld

Why: the kernel maps a file's pages by 64 KiB windows around a read fault
(fault-around), so any function run maps the 16 pages of its window, and
libsluice's text (~170 KiB) was resident whole in every program although
the functions a small program runs are ~55 KiB of it. Grouped, they fill
two windows and the cold code (statistics printing, options' errors, the
profiler, sl_check, the bulk and cache calls, fork handlers, jemalloc's
calls) stays unmapped (docs/benchmarks/small-rss.md).

The input: callgrind profiles of programs run with the library preloaded
(`valgrind --tool=callgrind --trace-children=yes env LD_PRELOAD=...`):
every function of the library (an object whose path holds --lib) with a
cost in any of them is hot, and those more of them run come first. A name is matched with its clones
(NAME.part.0, NAME.isra.0, ...); a function renamed since the list was
made is only placed with the cold code: the list costs RSS when stale,
never correctness. ALWAYS lists what a profile under valgrind seldom
shows but native runs do: C++'s operator new and delete, a lock's wait
under contention. A function is its section by the name it was defined
with, which the profile may not show: malloc is an alias of sl_malloc,
in .text.sl_malloc; so every name at a hot function's address in the
profiled library (--so, read with nm) is taken.

The text is placed at a 64 KiB boundary (it is mapped at one: the library
is, at 2 MiB for its size), and the read-only data before it, with the
headers that ld.so reads anyway: then the hot functions, .init and the
PLT fill one window, and .eh_frame (read only to unwind) one of its own.
And the .bss arrays of a page or more (named in the profiled library)
follow the small variables, which then share a few pages.
"""
import argparse, re, subprocess, sys

BIG_BSS = 4096  # a .bss array this large or larger goes after the small variables

ALWAYS = ["_Znwm", "_Znam", "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm", "_ZnwmRKSt9nothrow_t",
          "_ZnamRKSt9nothrow_t",
          # a lock's wait, which valgrind's one thread at a time seldom shows
          "lock_acquire_slow", "lock_release_slow", "os_futex_wait", "os_futex_wake"]


def functions(path, lib):
    """Names of the functions of lib's object in one callgrind profile."""
    names = {"ob": {}, "fn": {}}
    ob = None
    hot = set()
    for line in open(path, errors="replace"):
        m = re.match(r"^(c?)(ob|fn)=(?:\((\d+)\))? ?(.*)$", line.rstrip("\n"))
        if not m:
            continue
        called, kind, ident, name = m.groups()
        table = names[kind]
        if ident is not None:
            if name:
                table[ident] = name
            name = table.get(ident, "")
        if called:
            continue
        if kind == "ob":
            ob = name
        elif ob and lib in ob:
            hot.add(name.split("'")[0])
    return hot


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profiles", nargs="+")
    ap.add_argument("--lib", default="libsluice")
    ap.add_argument("--so", required=True, help="the profiled library, for its aliases")
    a = ap.parse_args()
    runs = {}  # name: the profiles that ran it
    for p in a.profiles:
        for n in functions(p, a.lib):
            runs[n] = runs.get(n, 0) + 1
    for n in ALWAYS:
        runs[n] = len(a.profiles)
    hot = set(runs)
    at, big = {}, set()
    for line in subprocess.run(["nm", "-S", "--defined-only", a.so], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        f = line.split()
        if len(f) == 4 and f[2] in "tTiW":
            at.setdefault(f[0], []).append(f[3])
        elif len(f) == 4 and f[2] in "bB" and int(f[1], 16) >= BIG_BSS:
            big.add(f[3].split(".")[0])
    for names in at.values():
        n = max((runs[x] for x in names if x in runs), default=0)
        for x in names:
            if n:
                runs[x] = n
    score = {}
    for n, k in runs.items():
        if n and not n.endswith(".cold") and "(" not in n and not n.startswith("0x"):
            b = n.split(".")[0]
            score[b] = max(score.get(b, 0), k)
    # what more programs run first: if the list outgrows its 64 KiB window,
    # the programs that run the functions past it pay for the second one
    bases = sorted(score, key=lambda b: (-score[b], b))
    out = sys.stdout
    out.write("/* hot-text.ld — written by tools/hot_text.py (its top says why and how);\n"
              " * the functions small programs run, first in libsluice's text. */\n"
              "SECTIONS\n{\n  .text :\n  {\n")
    for b in bases: # gcc's sections of b: its body, its clones, its cold part (b.cold)
        # or all of it when gcc found it cold, a constructor's, a destructor's
        out.write(f"    *(.text.{b} .text.{b}.* .text.unlikely.{b} .text.unlikely.{b}.* .text.startup.{b} "
                  f".text.exit.{b})\n")
    # crtbeginS.o's frame_dummy and register_tm_clones, which ld.so runs at
    # load and exit
    out.write("    *crtbeginS.o(.text .text.*)\n    *crtendS.o(.text .text.*)\n")
    # libc_nonshared.a's pthread_atfork, which the constructor calls (not
    # built with -ffunction-sections)
    out.write("    *libc_nonshared.a:*(.text .text.*)\n")
    # _fini, which ld.so calls at exit: here, it maps no window of its own
    # at the end of the text (crti.o's part and crtn.o's stay in order)
    out.write("    KEEP (*(SORT_NONE(.fini)))\n")
    # then the rest of the text, as the default script has it: so this is
    # the one .text (valgrind takes only .text's functions for functions),
    # and the default's, empty, goes
    out.write("    *(.text.unlikely .text.*_unlikely .text.unlikely.*)\n    *(.text.exit .text.exit.*)\n"
              "    *(.text.startup .text.startup.*)\n    *(.text.hot .text.hot.*)\n    *(SORT(.text.sorted.*))\n"
              "    *(.text .stub .text.* .gnu.linkonce.t.*)\n    *(.gnu.warning)\n")
    out.write("  }\n}\nINSERT AFTER .plt.got;\n")
    out.write("SECTIONS\n{\n  .rodata :\n  {\n    *(.rodata .rodata.* .gnu.linkonce.r.*)\n  }\n}\n"
              "INSERT AFTER .rela.plt;\n")
    out.write("SECTIONS\n{\n  . = ALIGN(0x10000);\n}\nINSERT BEFORE .init;\n")
    # the zeroed arrays of a page or more after the rest of .bss, so that
    # the small variables, most of them written at the first malloc, share
    # a few pages instead of one beside each array (objects built with
    # -fdata-sections)
    out.write("SECTIONS\n{\n  .bss.sl_big (NOLOAD) :\n  {\n")
    for b in sorted(big):
        out.write(f"    *(.bss.{b} .bss.{b}.*)\n")
    out.write("  }\n}\nINSERT AFTER .bss;\n")


if __name__ == "__main__":
    main()
