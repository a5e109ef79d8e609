#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The names a set of public headers declares with external linkage: the
functions (from the compiler itself, gcc -aux-info, so macros, typedefs
and line breaks are the compiler's business) and the extern variables.

    api_names.py [--cc CC] [-I DIR]... [--map] HEADER...

prints one name a line, sorted; with --map, an anonymous version script
(`{ global: a; b; local: *; };`) that exports exactly those names.  The
version script is anonymous on purpose: a named version node would tag
every symbol with it, and a program's versioned references (read@GLIBC_...)
would then no longer bind to an interposer.

Used by CMake to make the export lists of libntbx.so and libntbx-shmem.so,
and by tests/exports.sh to check what the libraries export.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

TYPE_WORDS = {"void", "int", "char", "short", "long", "unsigned", "signed",
              "float", "double", "const", "volatile", "struct", "union",
              "enum", "extern", "_Bool", "__attribute__"}
# Top-level `extern TYPE name;` or `extern TYPE name[N];` (not extern "C").
EXTERN_VAR = re.compile(r'^\s*extern\s+(?!")[^;(]*?\b([A-Za-z_]\w*)\s*'
                        r'(\[[^\]]*\])?\s*;')


def names(cc, incs, headers):
    headers = [os.path.realpath(h) for h in headers]
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "all.c")
        aux = os.path.join(tmp, "aux.txt")
        with open(src, "w") as f:
            for h in headers:
                f.write('#include "%s"\n' % h)
        flags = ["-D_GNU_SOURCE"] + ["-I" + i for i in incs]
        # -aux-info is gcc's; under another compiler (make fuzz's clang)
        # ask gcc, which is there to build the rest.
        for c in (cc, "gcc"):
            try:
                r = subprocess.run([c] + flags + ["-fsyntax-only", "-aux-info",
                                                  aux, src],
                                   capture_output=True)
            except OSError:
                continue
            if r.returncode == 0 and os.path.exists(aux):
                cc = c
                break
        else:
            sys.exit("api_names: no compiler of %s and gcc took -aux-info"
                     % cc)
        pre = subprocess.run([cc] + flags + ["-E", src], check=True,
                             capture_output=True, text=True).stdout
        out = set()
        with open(aux) as f:
            for line in f:
                m = re.match(r"/\* (.*?):\d+:\w+ \*/ (.*)", line)
                if not m or os.path.realpath(m.group(1)) not in headers:
                    continue
                decl = m.group(2)
                if decl.startswith("static"):
                    continue   # static inline: nothing to export
                for word in re.findall(r"([A-Za-z_]\w*) \(", decl):
                    if word not in TYPE_WORDS:
                        out.add(word)
                        break
        # Variables: the preprocessed text, lines that come from a header.
        current = None
        for line in pre.splitlines():
            mark = re.match(r'# \d+ "(.*?)"', line)
            if mark:
                current = os.path.realpath(mark.group(1))
                continue
            if current in headers:
                v = EXTERN_VAR.match(line)
                if v:
                    out.add(v.group(1))
        return sorted(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    ap.add_argument("-I", dest="incs", action="append", default=[])
    ap.add_argument("--map", action="store_true")
    ap.add_argument("-o", dest="out")
    ap.add_argument("headers", nargs="+")
    a = ap.parse_args()
    got = names(a.cc, a.incs, a.headers)
    if not got:
        sys.exit("api_names: no names declared in %s" % " ".join(a.headers))
    if a.map:
        text = "{\n  global:\n" + "".join("    %s;\n" % n for n in got) + \
               "  local: *;\n};\n"
    else:
        text = "".join(n + "\n" for n in got)
    if a.out:
        # Rewrite only on change: the libraries relink when it changes.
        old = open(a.out).read() if os.path.exists(a.out) else None
        if old != text:
            with open(a.out, "w") as f:
                f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
