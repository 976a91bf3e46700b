#!/usr/bin/env python3
"""Write the man pages sluice(3) and sluice(1) from the sources they
describe, so that the README and the pages never disagree:

- the prose is the README's own sections, converted from Markdown to roff
  (headings, paragraphs, lists, code blocks, tables, `code`, **bold**);
- the synopsis of sluice(3) is every SL_API declaration of include/sluice.h;
- its STATISTICS list is the counter and gauge tables of src/stats
  (SL_STAT_LIST, SL_GAUGE_LIST), each name with its one-line meaning;
- the options of sluice(1) are the command's own argparse help.

  python3 tools/man.py OUTDIR      (CMake runs it: build/man/sluice.{1,3})
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read(rel):
    with open(os.path.join(ROOT, rel)) as f:
        return f.read()


def readme_section(title, skip=()):
    """The body of the README section whose heading starts with title (up to
    the next heading of the same or a higher level), less its subsections
    whose titles start with one of skip (charts and figures: not for a man
    page)."""
    lines = read("README.md").splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"(#+) (.*)", line)
        if m and m.group(2).startswith(title):
            level = len(m.group(1))
            body, skipping = [], None
            for nxt in lines[i + 1:]:
                n = re.match(r"(#+) (.*)", nxt)
                if n and len(n.group(1)) <= level:
                    break
                if n and skipping is not None and len(n.group(1)) <= skipping:
                    skipping = None
                if n and n.group(2).startswith(skip or ("\0",)):
                    skipping = len(n.group(1))
                if skipping is None:
                    body.append(nxt)
            return body
    raise SystemExit(f"man.py: README has no section '{title}'")


def uni(text):
    """Characters beyond ASCII as groff's \\[uXXXX] escapes."""
    return "".join(c if ord(c) < 128 else "\\[u%04X]" % ord(c) for c in text)


def esc(text):
    """Roff-escape plain text, then turn `code` and **bold** into fonts."""
    text = uni(text.replace("\\", "\\e").replace("-", "\\-"))
    text = re.sub(r"`([^`]*)`", r"\\fB\1\\fR", text)
    text = re.sub(r"\*\*([^*]*)\*\*", r"\\fB\1\\fR", text)
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", text)  # images: not in a man page
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return text


def line_start(text):
    """A roff text line must not start with . or ' (a request)."""
    return "\\&" + text if text[:1] in (".", "'") else text


def markdown(lines):
    out, para, i = [], [], 0

    def flush():
        if para:
            out.append(".PP")
            out.append(line_start(esc(" ".join(para))))
            para.clear()

    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            flush()
            out.append(".PP\n.nf\n.RS 4")
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                out.append(line_start(uni(lines[i].replace("\\", "\\e"))))
                i += 1
            out.append(".RE\n.fi")
        elif line.startswith("|"):
            flush()
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
                if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                    rows.append(cells)
                i += 1
            i -= 1
            head, body = rows[0], rows[1:]
            for r in body:  # a table reads as a list of tagged paragraphs
                out.append(".TP")
                out.append(line_start(esc(r[0])))
                rest = "; ".join(f"{head[k]}: {r[k]}" for k in range(1, len(r)) if r[k])
                out.append(line_start(esc(rest)))
        elif re.match(r"\s*[-*] ", line):
            flush()
            indent = len(line) - len(line.lstrip())
            text = [re.sub(r"^\s*[-*] ", "", line)]
            while i + 1 < len(lines) and lines[i + 1].strip() and not re.match(r"\s*[-*] ", lines[i + 1]) \
                    and not lines[i + 1].startswith(("|", "```", "#")):
                i += 1
                text.append(lines[i].strip())
            out.append(".IP \\(bu %d" % (2 + indent // 2 * 2 + 2) if indent else ".IP \\(bu 2")
            out.append(line_start(esc(" ".join(text))))
        elif re.match(r"#+ ", line):
            flush()
            out.append(".SS " + esc(re.sub(r"^#+ ", "", line)))
        elif not line.strip():
            flush()
        else:
            para.append(line.strip())
        i += 1
    flush()
    return out


def header(name, section, title):
    return [f'.TH {name.upper()} {section} "" "sluice" "{title}"']


def stat_list():
    src = read("src/stats/stats.h") + read("src/stats/stats.c")
    return re.findall(r'X\((\w+), "([^"]*)"\)', src)


def page3():
    protos = []
    for m in re.finditer(r"^SL_API ([^;]*\));", read("include/sluice.h"), re.M | re.S):
        protos.append(" ".join(m.group(1).split()))
    out = header("sluice", 3, "sluice memory allocator")
    out += [".SH NAME", "sluice \\- a memory allocator: drop\\-in malloc, object caches, bulk free",
            ".SH SYNOPSIS", ".nf", "\\fB#include <sluice.h>\\fR", ""]
    out += [line_start(p.replace("\\", "\\e").replace("-", "\\-") + ";") for p in protos]
    out += [".fi", ".PP", "Link with \\fB\\-lsluice\\fR, or load with \\fBLD_PRELOAD=libsluice.so.0\\fR (the SONAME; \\fBlibsluice.so\\fR is its development link).",
            ".SH DESCRIPTION"]
    out += markdown(readme_section("Using it"))
    out += [".SH ENVIRONMENT"] + markdown(readme_section("Options"))
    out += [".SH STATISTICS", ".PP",
            "\\fBsl_stat\\fR(\\fIname\\fR) reads one of these; \\fBsl_stats_print\\fR and "
            "\\fBSLUICE_STATS=1\\fR print them all, \\fBsl_stats_json\\fR and \\fBSLUICE_STATS=json\\fR "
            "as JSON. Counters first, then gauges:"]
    for name, text in stat_list():
        out += [".TP", "\\fB" + name + "\\fR", line_start(esc(text))]
    out += [".SH CHECKED MODE"] + markdown(readme_section("The checked mode"))
    out += [".SH SEE ALSO", "\\fBsluice\\fR(1), \\fBmalloc\\fR(3), \\fBmadvise\\fR(2)"]
    return out


def page1(command):
    helptext = subprocess.run([sys.executable, command, "run", "--help"], capture_output=True, text=True,
                              check=True).stdout
    opts = re.findall(r"^  (--\S+(?: \S+)?)\s+(.*)$", helptext, re.M)
    out = header("sluice", 1, "sluice memory allocator")
    out += [".SH NAME", "sluice \\- run a program under the sluice allocator and watch its memory",
            ".SH SYNOPSIS", ".B sluice run", "[\\fIoptions\\fR] \\fB\\-\\-\\fR \\fIprogram\\fR [\\fIargs\\fR...]",
            ".SH DESCRIPTION"]
    out += markdown(readme_section("Watching a program's memory", skip=("A timeline",)))
    out += [".SH OPTIONS"]
    for flag, text in opts:
        if flag.startswith("--help"):
            continue
        out += [".TP", "\\fB" + esc(flag) + "\\fR", line_start(esc(text))]
    out += [".SH EXIT STATUS", "The program's own; 128 + \\fIN\\fR when signal \\fIN\\fR killed it; "
            "127 when the program is not found; 2 when it cannot be run under sluice (static or setuid) "
            "or an option is wrong.",
            ".SH SEE ALSO", "\\fBsluice\\fR(3)"]
    return out


def main():
    outdir = sys.argv[1]
    command = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "tools", "sluice.py")
    os.makedirs(outdir, exist_ok=True)
    for name, lines in (("sluice.3", page3()), ("sluice.1", page1(command))):
        with open(os.path.join(outdir, name), "w") as f:
            f.write("\n".join(lines) + "\n")
    # every function of the API finds sluice(3): `man sl_cache_alloc`
    aliases = os.path.join(outdir, "aliases")
    os.makedirs(aliases, exist_ok=True)
    header = read("include/sluice.h")
    for m in re.finditer(r"^SL_API [^;(]*?\b(sl_[a-z_0-9]+)\(", header, re.M):
        with open(os.path.join(aliases, m.group(1) + ".3"), "w") as f:
            f.write(".so man3/sluice.3\n")


if __name__ == "__main__":
    main()
