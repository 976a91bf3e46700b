#!/usr/bin/env python3
"""The documentation that sluice's tables write, so that it cannot drift
from the code:

- the option table of README.md and the man page sluice_options(7), from
  SL_OPTION_LIST (src/options/options.h), read through the C preprocessor
  so that the rows are exactly what the library parses;
- the STATISTICS list of sl_stat(3), from SL_STAT_LIST and SL_GAUGE_LIST
  (src/stats/stats.h).

The man pages are docs/man/NAME.in, roff with one @TABLE@ line each; the
rest of every man page is written by hand in docs/man/.

  python3 tools/doc_tables.py man OUTDIR     write OUTDIR/sluice_options.7 and sl_stat.3
  python3 tools/doc_tables.py readme         exit 1 (and show the difference) when the
                                             README's option table is not the table's
  python3 tools/doc_tables.py readme --write rewrite the README's option table

CC (default cc) is the preprocessor's compiler.
"""
import ast
import difflib
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN = "<!-- the option table: tools/doc_tables.py writes it from SL_OPTION_LIST; edit src/options/options.h -->"
END = "<!-- end of the option table -->"


def options():
    """SL_OPTION_LIST's rows as dicts: env, shown, runtime, text."""
    src = ('#include "src/options/options.h"\n'
           "#define ROW(field, env, def, shown, parse, rw, text) (env, shown, rw, text),\n"
           "SLUICE_ROWS_BEGIN SL_OPTION_LIST(ROW) SLUICE_ROWS_END\n")
    out = subprocess.run([os.environ.get("CC", "cc"), "-E", "-P", "-I", ROOT, "-x", "c", "-"], input=src,
                         capture_output=True, text=True, check=True).stdout
    body = out[out.index("SLUICE_ROWS_BEGIN") + len("SLUICE_ROWS_BEGIN"):out.index("SLUICE_ROWS_END")]
    return [dict(env=e, shown=s, runtime=bool(rw), text=t) for e, s, rw, t in ast.literal_eval("[" + body + "]")]


def statistics():
    """(counters, gauges): lists of (name, meaning)."""
    with open(os.path.join(ROOT, "src/stats/stats.h")) as f:
        h = f.read()

    def rows(macro):
        block = h[h.index("#define " + macro):]
        block = block[:block.index("\n\n")]
        return re.findall(r'X\((\w+), "([^"]*)"\)', block)
    return rows("SL_STAT_LIST"), rows("SL_GAUGE_LIST")


def markdown_table():
    lines = [BEGIN, "", "| variable | default | `sl_ctl` at run time | meaning |", "|---|---|---|---|"]
    for o in options():
        lines.append(f"| `{o['env']}` | {o['shown']} | {'yes' if o['runtime'] else 'no'} | {o['text']} |")
    return lines + ["", END]


def roff(text):
    """Markdown-lite text (`code`) as roff: escapes, code in bold."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    text = "".join(c if ord(c) < 128 else "\\[u%04X]" % ord(c) for c in text)
    text = re.sub(r"`([^`]*)`", r"\\fB\1\\fR", text)
    return "\\&" + text if text[:1] in (".", "'") else text


def option_items():
    out = []
    for o in options():
        when = "may be changed while the program runs" if o["runtime"] else "fixed at start"
        out += [".TP", ".B " + o["env"], f"Default: {roff(o['shown'])}; {when}.", ".br", roff(o["text"]) + "."]
    return out


def stat_items():
    counters, gauges = statistics()
    out = []
    for title, what, rows in (("Counters", "Events since the program started.", counters),
                              ("Gauges", "The state now.", gauges)):
        out += [".SS " + title, what, ".PD 0"]  # one line a name, as sl_stats_print lays them out
        for name, text in rows:
            out += [".TP 26", ".B " + name, roff(text)]
        out += [".PD"]
    return out


TABLES = {"sluice_options.7": option_items, "sl_stat.3": stat_items}  # docs/man/NAME.in: its list


def fill(template, items):
    with open(os.path.join(ROOT, "docs", "man", template)) as f:
        page = f.read()
    if page.count("@TABLE@\n") != 1:
        raise SystemExit(f"doc_tables.py: docs/man/{template} needs one line @TABLE@")
    return page.replace("@TABLE@\n", "\n".join(items) + "\n")


def readme(write):
    path = os.path.join(ROOT, "README.md")
    with open(path) as f:
        lines = f.read().split("\n")
    if BEGIN not in lines or END not in lines:
        raise SystemExit(f"doc_tables.py: README.md lacks the lines\n{BEGIN}\n{END}")
    a, b = lines.index(BEGIN), lines.index(END)
    table = markdown_table()
    if lines[a:b + 1] == table:
        return 0
    if write:
        with open(path, "w") as f:
            f.write("\n".join(lines[:a] + table + lines[b + 1:]))
        return 0
    sys.stdout.writelines(difflib.unified_diff([x + "\n" for x in lines[a:b + 1]], [x + "\n" for x in table],
                                               "README.md", "SL_OPTION_LIST"))
    print("README.md's option table is not SL_OPTION_LIST's: python3 tools/doc_tables.py readme --write")
    return 1


def main(argv):
    if argv[:1] == ["man"] and len(argv) == 2:
        os.makedirs(argv[1], exist_ok=True)
        for template in sorted(os.listdir(os.path.join(ROOT, "docs", "man"))):
            if not template.endswith(".in"):
                continue
            name = template[:-3]
            if name not in TABLES:
                raise SystemExit(f"doc_tables.py: docs/man/{template}: no table for it (TABLES knows "
                                 f"{', '.join(TABLES)})")
            with open(os.path.join(argv[1], name), "w") as f:
                f.write(fill(template, TABLES[name]()))
        return 0
    if argv[:1] == ["readme"]:
        return readme("--write" in argv)
    raise SystemExit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
