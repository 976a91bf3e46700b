"""sluice_prof — read the heap profiles libsluice writes (pprof's
profile.proto, uncompressed), name their frames, list the top sites and
draw a flame graph; for `sluice run --profile` and `--flame`.

Only the standard library: the protocol buffer is decoded here (the few
messages a profile has), and frames are named by addr2line (binutils), one
run per object file, in an environment without LD_PRELOAD or SLUICE_*;
without addr2line a frame is its file and offset.
"""
import collections
import html
import os
import subprocess
import zlib

# ---- the protocol buffer ------------------------------------------------------


def _varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        if not c & 0x80:
            return v, i
        shift += 7


def _fields(b):
    """(field number, wire type, value) of one message: ints for varints,
    bytes for length-delimited fields."""
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        f, t = key >> 3, key & 7
        if t == 0:
            v, i = _varint(b, i)
        elif t == 2:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        elif t == 1:
            v, i = int.from_bytes(b[i:i + 8], "little"), i + 8
        elif t == 5:
            v, i = int.from_bytes(b[i:i + 4], "little"), i + 4
        else:
            raise ValueError(f"wire type {t}")
        yield f, t, v


def _ints(t, v):
    """A repeated integer field's values, packed or not."""
    if t == 0:
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = _varint(v, i)
        out.append(x)
    return out


def _signed(x):
    return x - (1 << 64) if x >= 1 << 63 else x


class Profile:
    """A profile: sample types, samples (location ids leaf first, values,
    labels), locations, mappings and functions, as profile.proto has them."""

    def __init__(self, path):
        with open(path, "rb") as f:
            data = f.read()
        if data[:2] == b"\x1f\x8b":
            data = zlib.decompress(data, 47)
        self.path = path
        strings, types, samples = [], [], []
        self.locations, self.mappings, self.functions = {}, {}, {}
        raw_types, raw_funcs = [], {}
        for f, t, v in _fields(data):
            if f == 1:
                d = {ff: vv for ff, _, vv in _fields(v)}
                raw_types.append((d.get(1, 0), d.get(2, 0)))
            elif f == 2:
                locs, vals, labels = [], [], []
                for ff, tt, vv in _fields(v):
                    if ff == 1:
                        locs += _ints(tt, vv)
                    elif ff == 2:
                        vals += [_signed(x) for x in _ints(tt, vv)]
                    elif ff == 3:
                        labels.append({k: x for k, _, x in _fields(vv)})
                samples.append((locs, vals, labels))
            elif f == 3:
                d = {ff: vv for ff, _, vv in _fields(v)}
                self.mappings[d.get(1, 0)] = (d.get(2, 0), d.get(3, 0), d.get(4, 0), d.get(5, 0))
            elif f == 4:
                d, funcs = {}, []
                for ff, _, vv in _fields(v):
                    if ff == 4:
                        funcs.append({k: x for k, _, x in _fields(vv)}.get(1, 0))
                    else:
                        d[ff] = vv
                self.locations[d.get(1, 0)] = (d.get(2, 0), d.get(3, 0), funcs)
            elif f == 5:
                d = {ff: vv for ff, _, vv in _fields(v)}
                raw_funcs[d.get(1, 0)] = d.get(2, 0)
            elif f == 6:
                strings.append(v.decode("utf-8", "replace"))
        self.sample_types = [strings[a] for a, _ in raw_types]
        self.functions = {k: strings[v] for k, v in raw_funcs.items()}
        self.mappings = {k: (a, b, c, strings[d]) for k, (a, b, c, d) in self.mappings.items()}
        self.samples = [(locs, vals, [{strings[l.get(1, 0)]: strings[l.get(2, 0)]} for l in labels])
                        for locs, vals, labels in samples]

    def index(self, name):
        return self.sample_types.index(name)


# ---- naming frames ------------------------------------------------------------

_OWN = ("sluice", "libsluice")


def name_frames(profiles):
    """{(profile path, location id): name} for every location of the
    profiles: the Function name the profile gives (an object cache's
    "cache:NAME"), else addr2line's function and file:line, else the
    object file and offset."""
    want = collections.defaultdict(set)  # object file -> file-relative addresses
    where = {}
    for p in profiles:
        for lid, (mid, addr, funcs) in p.locations.items():
            if funcs:
                where[(p.path, lid)] = " ".join(p.functions.get(f, "?") for f in funcs)
                continue
            m = p.mappings.get(mid)
            if not m or not m[3].startswith("/"):
                where[(p.path, lid)] = f"{addr:#x}"
                continue
            rel = addr - m[0] + m[2]
            want[m[3]].add(rel)
            where[(p.path, lid)] = (m[3], rel)
    named = {}
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("SLUICE_")}
    for obj, rels in want.items():
        rels = sorted(rels)
        names = {}
        try:
            out = subprocess.run(["addr2line", "-f", "-C", "-e", obj] + [f"{r:#x}" for r in rels],
                                 capture_output=True, text=True, env=env, timeout=60).stdout.split("\n")
            for k, r in enumerate(rels):
                fn, line = out[2 * k], out[2 * k + 1]
                if fn and fn != "??":
                    fl = line.rsplit("/", 1)[-1].split(" ")[0]
                    names[r] = fn + ("" if fl.startswith("??") else f" ({fl})")
        except (OSError, subprocess.SubprocessError, IndexError):
            pass
        for r in rels:
            named[(obj, r)] = names.get(r, f"{os.path.basename(obj)}+{r:#x}")
    return {k: (named[v] if isinstance(v, tuple) else v) for k, v in where.items()}


def stacks(profile, names, value):
    """(frames outermost first, value) of each sample of the profile with a
    nonzero value, the sample type named `value`."""
    i = profile.index(value)
    for locs, vals, _ in profile.samples:
        if vals[i] > 0:
            yield [names[(profile.path, l)] for l in reversed(locs)], vals[i]


def _is_own(frame):
    return frame.startswith(("malloc ", "calloc ", "realloc ", "free ", "sl_", "operator new"))


def site(frames):
    """A stack's site: its innermost frame that is the program's (not an
    allocation entry point), with its caller."""
    inner = [f for f in frames if not _is_own(f)] or frames
    return inner[-1] + (f" <- {inner[-2].split(' (')[0]}" if len(inner) > 1 else "")


def top_sites(profiles, names, value, n=8):
    """[(value, share, site)] of the profiles merged, biggest first."""
    total, by = 0, collections.Counter()
    for p in profiles:
        for frames, v in stacks(p, names, value):
            by[site(frames)] += v
            total += v
    return [(v, v / total if total else 0, s) for s, v in by.most_common(n)], total


# ---- the flame graph ----------------------------------------------------------


def flame_svg(profiles, names, value, path, title):
    """Draw the merged stacks of `value` as a flame graph (root at the
    bottom, each frame as wide as what it holds) in an SVG at path."""
    root = {"n": 0, "kids": {}}
    for p in profiles:
        for frames, v in stacks(p, names, value):
            node = root
            node["n"] += v
            for f in frames:
                node = node["kids"].setdefault(f, {"n": 0, "kids": {}})
                node["n"] += v
    width, row, pad = 1200, 17, 10

    def depth(node):
        return 1 + max((depth(k) for k in node["kids"].values()), default=0)

    rows = depth(root)
    height = rows * row + 3 * pad + 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="monospace" font-size="11">',
           f'<rect width="100%" height="100%" fill="#fdfdf6"/>',
           f'<text x="{pad}" y="{pad + 12}" font-size="14">{html.escape(title)}</text>']
    scale = (width - 2 * pad) / root["n"] if root["n"] else 0

    def fmt(b):
        return f"{b / 1048576:.1f} MiB" if b >= 1 << 20 else f"{b / 1024:.1f} KiB"

    def draw(name, node, x, level):
        w = node["n"] * scale
        if w < 0.5:
            return
        y = height - pad - (level + 1) * row
        h = zlib.crc32(name.encode()) & 0xFFFF
        color = f"rgb({205 + h % 50},{80 + (h >> 4) % 120},{40 + (h >> 9) % 50})"
        share = 100 * node["n"] / root["n"]
        tip = html.escape(f"{name}: {fmt(node['n'])} ({share:.1f}%)")
        out.append(f'<g><title>{tip}</title><rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row - 1}" '
                   f'fill="{color}" rx="2"/>')
        chars = int((w - 4) / 6.6)
        if chars >= 3:
            label = name if len(name) <= chars else name[:chars - 2] + ".."
            out.append(f'<text x="{x + 3:.1f}" y="{y + row - 5}">{html.escape(label)}</text>')
        out.append("</g>")
        for kid_name, kid in sorted(node["kids"].items()):
            draw(kid_name, kid, x, level + 1)
            x += kid["n"] * scale

    draw("all", root, pad, 0)
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return root["n"]
