#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate the typed OpenSHMEM 1.6 interfaces from one type table.

    gen_shmem.py TEMPLATE OUT_HEADER OUT_C_PREFIX [OUT_PSHMEM_H
                 OUT_PSHMEM_LD [OUT_SHMEMX_GEN_H]]

TEMPLATE is shmem.h.in; its line "@NTBX_TYPED_DECLS@" is replaced by the
typed prototypes and the C11 _Generic macros (OUT_HEADER, shmem.h).
The typed definitions, each a few lines over the generic core that
shmem_int.h declares, go into one file per API area, as the hand-written
files that implement that core: OUT_C_PREFIX_rma.c (RMA and put_signal,
over ntbx_sh_put/_get/_iput/_iget/_ib of shmem_rma.c and
shmem_ctx_putmem_signal of shmem_signal.c), _amo.c (ntbx_sh_amo,
shmem_amo.c), _sync.c (wait_until and test, over ntbx_sh_spin* of
shmem_signal.c) and _coll.c (reductions, scans, *_to_all and the typed
team collectives, over ntbx_sh_reduce/_scan/_reduce_aset/_collect/
_fcollect/_alltoall(s) of shmem_coll.c and ntbx_sh_broadcast of
shmem_barrier.c).  OUT_PSHMEM_H and OUT_PSHMEM_LD are
the profiling interface (pshmem_X = shmem_X for every routine of the
header), OUT_SHMEMX_GEN_H the pre-1.6 shmemx_ spellings of the 1.6
routines.  Nothing typed is written by hand: add a type here and every
family gets it.
"""
import sys

# (C type, TYPENAME, is_alias_of_a_basic_type)  -- spec 1.5 Table 5 (RMA)
RMA = [
    ("float", "float", 0), ("double", "double", 0),
    ("long double", "longdouble", 0), ("char", "char", 0),
    ("signed char", "schar", 0), ("short", "short", 0), ("int", "int", 0),
    ("long", "long", 0), ("long long", "longlong", 0),
    ("unsigned char", "uchar", 0), ("unsigned short", "ushort", 0),
    ("unsigned int", "uint", 0), ("unsigned long", "ulong", 0),
    ("unsigned long long", "ulonglong", 0),
    ("int8_t", "int8", 1), ("int16_t", "int16", 1), ("int32_t", "int32", 1),
    ("int64_t", "int64", 1), ("uint8_t", "uint8", 1),
    ("uint16_t", "uint16", 1), ("uint32_t", "uint32", 1),
    ("uint64_t", "uint64", 1), ("size_t", "size", 1),
    ("ptrdiff_t", "ptrdiff", 1),
]
T = {n: (c, a) for c, n, a in RMA}
T["complexf"] = ("float _Complex", 0)
T["complexd"] = ("double _Complex", 0)

AMO_STD = ["int", "long", "longlong", "uint", "ulong", "ulonglong", "int32",
           "int64", "uint32", "uint64", "size", "ptrdiff"]
AMO_EXT = ["float", "double"] + AMO_STD
AMO_BIT = ["uint", "ulong", "ulonglong", "int32", "int64", "uint32", "uint64"]
SYNC = ["short", "int", "long", "longlong", "ushort", "uint", "ulong",
        "ulonglong", "int32", "int64", "uint32", "uint64", "size", "ptrdiff"]
BITRED = ["uchar", "ushort", "uint", "ulong", "ulonglong", "int8", "int16",
          "int32", "int64", "uint8", "uint16", "uint32", "uint64", "size"]
MINMAX = ["char", "schar", "short", "int", "long", "longlong", "ptrdiff",
          "uchar", "ushort", "uint", "ulong", "ulonglong", "int8", "int16",
          "int32", "int64", "uint8", "uint16", "uint32", "uint64", "size",
          "float", "double", "longdouble"]
ARITH = MINMAX + ["complexf", "complexd"]
RED_OPS = {"and": BITRED, "or": BITRED, "xor": BITRED, "max": MINMAX,
           "min": MINMAX, "sum": ARITH, "prod": ARITH}
# Deprecated *_to_all reductions (spec 1.4 table).
OLD_RED = {"and": ["short", "int", "long", "longlong"],
           "or": ["short", "int", "long", "longlong"],
           "xor": ["short", "int", "long", "longlong"]}
for op in ("max", "min"):
    OLD_RED[op] = ["short", "int", "long", "longlong", "float", "double",
                   "longdouble"]
for op in ("sum", "prod"):
    OLD_RED[op] = OLD_RED["max"] + ["complexf", "complexd"]
# Deprecated AMO names (spec 1.3 names, still used by benchmarks).
OLD_AMO_STD = ["int", "long", "longlong"]
OLD_AMO_EXT = ["int", "long", "longlong", "float", "double"]
SIZES = [8, 16, 32, 64, 128]

hdr = []   # prototypes
gen = []   # _Generic macros
# definitions, per API area (one generated file each); src is the area's
AREAS = {"rma": "remote memory access and put_signal",
         "amo": "atomic memory operations",
         "sync": "point-to-point synchronization (wait_until, test)",
         "coll": "reductions, scans and the typed team collectives"}
SRC = {a: [] for a in AREAS}
src = SRC["rma"]


def ct(n):
    return T[n][0]


def proto(ret, name, args):
    hdr.append("%s %s(%s);" % (ret, name, args))


def define(ret, name, args, body):
    src.append("%s %s(%s)\n{\n%s}\n" % (ret, name, args, body))


# ------------------------------------------------------------------ RMA
def rma(kind, cty, name, es):
    """kind: put/get/iput/iget/ibput/ibget/put_nbi/get_nbi; name: the
    function name with %s where the kind goes."""
    c = "shmem_ctx_t ctx, "
    if kind in ("put", "put_nbi"):
        args = "%s *dest, const %s *source, size_t nelems, int pe" % (cty, cty)
        call = "ntbx_sh_put(ctx, dest, source, nelems * %s, pe);" % es
    elif kind in ("get", "get_nbi"):
        args = "%s *dest, const %s *source, size_t nelems, int pe" % (cty, cty)
        call = "ntbx_sh_get(ctx, dest, source, nelems * %s, pe);" % es
    elif kind == "iput":
        args = ("%s *dest, const %s *source, ptrdiff_t dst, ptrdiff_t sst, "
                "size_t nelems, int pe" % (cty, cty))
        call = ("ntbx_sh_iput(ctx, dest, source, dst, sst, nelems, %s, pe);"
                % es)
    elif kind == "iget":
        args = ("%s *dest, const %s *source, ptrdiff_t dst, ptrdiff_t sst, "
                "size_t nelems, int pe" % (cty, cty))
        call = ("ntbx_sh_iget(ctx, dest, source, dst, sst, nelems, %s, pe);"
                % es)
    else:  # ibput/ibget (1.6): nblocks blocks of bsize elements
        args = ("%s *dest, const %s *source, ptrdiff_t dst, ptrdiff_t sst, "
                "size_t bsize, size_t nblocks, int pe" % (cty, cty))
        call = ("ntbx_sh_ib(ctx, %d, dest, source, dst, sst, bsize, nblocks, "
                "%s, pe);" % (kind == "ibput", es))
    fn = name % kind
    cfn = fn.replace("shmem_", "shmem_ctx_", 1)
    proto("void", cfn, c + args)
    proto("void", fn, args)
    define("void", cfn, c + args, "\t%s\n" % call)
    argn = ", ".join(a.split()[-1].lstrip("*") for a in args.split(","))
    define("void", fn, args, "\t%s(SHMEM_CTX_DEFAULT, %s);\n" % (cfn, argn))


RMA_KINDS = ("put", "get", "iput", "iget", "ibput", "ibget", "put_nbi",
             "get_nbi")
for cty, n, _ in RMA:
    for k in RMA_KINDS:
        rma(k, cty, "shmem_" + n + "_%s", "sizeof(%s)" % cty)
    # p and g
    for pre, ctxa, ctxv in (("shmem_", "", "SHMEM_CTX_DEFAULT"),
                            ("shmem_ctx_", "shmem_ctx_t ctx, ", "ctx")):
        a = "%s%s *dest, %s value, int pe" % (ctxa, cty, cty)
        proto("void", "%s%s_p" % (pre, n), a)
        define("void", "%s%s_p" % (pre, n), a,
               "\tntbx_sh_put(%s, dest, &value, sizeof value, pe);\n" % ctxv)
        a = "%sconst %s *source, int pe" % (ctxa, cty)
        proto(cty, "%s%s_g" % (pre, n), a)
        define(cty, "%s%s_g" % (pre, n), a,
               "\t%s v;\n\tntbx_sh_get(%s, &v, source, sizeof v, pe);\n"
               "\treturn v;\n" % (cty, ctxv))
for s in SIZES:
    for k in RMA_KINDS:
        # explicit names: shmem_put8, shmem_put8_nbi, shmem_iput8 ...
        base = k.replace("_nbi", "")
        suffix = "_nbi" if "_nbi" in k else ""
        fn = "shmem_%s%d%s" % (base, s, suffix)
        cfn = "shmem_ctx_%s%d%s" % (base, s, suffix)
        es = "%d" % (s // 8)
        if base in ("ibput", "ibget"):
            args = ("void *dest, const void *source, ptrdiff_t dst, "
                    "ptrdiff_t sst, size_t bsize, size_t nblocks, int pe")
            call = ("ntbx_sh_ib(ctx, %d, dest, source, dst, sst, bsize, "
                    "nblocks, %s, pe);" % (base == "ibput", es))
            argn = "dest, source, dst, sst, bsize, nblocks, pe"
        elif base in ("put", "get"):
            args = "void *dest, const void *source, size_t nelems, int pe"
            call = "ntbx_sh_%s(ctx, dest, source, nelems * %s, pe);" % (base, es)
            argn = "dest, source, nelems, pe"
        else:
            args = ("void *dest, const void *source, ptrdiff_t dst, "
                    "ptrdiff_t sst, size_t nelems, int pe")
            call = ("ntbx_sh_%s(ctx, dest, source, dst, sst, nelems, %s, pe);"
                    % (base, es))
            argn = "dest, source, dst, sst, nelems, pe"
        proto("void", cfn, "shmem_ctx_t ctx, " + args)
        proto("void", fn, args)
        define("void", cfn, "shmem_ctx_t ctx, " + args, "\t%s\n" % call)
        define("void", fn, args, "\t%s(SHMEM_CTX_DEFAULT, %s);\n" % (cfn, argn))
# put_signal: typed, sized and mem, blocking and nbi, with and without ctx
SIG = "uint64_t *sig_addr, uint64_t signal, int sig_op, int pe"
for suffix in ("", "_nbi"):
    names = [(ct(n), "shmem_%s_put_signal%s" % (n, suffix), "sizeof(%s)" % ct(n))
             for _, n, _ in RMA]
    names += [("void", "shmem_put%d_signal%s" % (s, suffix), "%d" % (s // 8))
              for s in SIZES]
    for cty, fn, es in names:
        cfn = fn.replace("shmem_", "shmem_ctx_", 1)
        args = ("%s *dest, const %s *source, size_t nelems, %s"
                % (cty, cty, SIG))
        proto("void", cfn, "shmem_ctx_t ctx, " + args)
        proto("void", fn, args)
        define("void", cfn, "shmem_ctx_t ctx, " + args,
               "\tshmem_ctx_putmem_signal(ctx, dest, source, nelems * %s, "
               "sig_addr, signal, sig_op, pe);\n" % es)
        define("void", fn, args,
               "\tshmem_ctx_putmem_signal(SHMEM_CTX_DEFAULT, dest, source, "
               "nelems * %s, sig_addr, signal, sig_op, pe);\n" % es)
for suffix in ("", "_nbi"):
    for base in ("put", "get"):
        fn = "shmem_%smem%s" % (base, suffix)
        cfn = "shmem_ctx_%smem%s" % (base, suffix)
        args = "void *dest, const void *source, size_t nelems, int pe"
        proto("void", cfn, "shmem_ctx_t ctx, " + args)
        proto("void", fn, args)
        define("void", cfn, "shmem_ctx_t ctx, " + args,
               "\tntbx_sh_%s(ctx, dest, source, nelems, pe);\n" % base)
        define("void", fn, args,
               "\t%s(SHMEM_CTX_DEFAULT, dest, source, nelems, pe);\n" % cfn)

# ------------------------------------------------------------------ AMO
src = SRC["amo"]
# (op name, NTBX op, fetches, args after dest, value expr, cond expr, types)
AMOS = [
    ("atomic_fetch", "NTBX_AMO_FETCH", 1, "", "0", "0", AMO_EXT),
    ("atomic_set", "NTBX_AMO_SET", 0, "T value", "value", "0", AMO_EXT),
    ("atomic_swap", "NTBX_AMO_SWAP", 1, "T value", "value", "0", AMO_EXT),
    ("atomic_compare_swap", "NTBX_AMO_CSWAP", 1, "T cond, T value", "value",
     "cond", AMO_STD),
    ("atomic_fetch_inc", "NTBX_AMO_FADD", 1, "", "1", "0", AMO_STD),
    ("atomic_inc", "NTBX_AMO_FADD", 0, "", "1", "0", AMO_STD),
    ("atomic_fetch_add", "NTBX_AMO_FADD", 1, "T value", "value", "0", AMO_STD),
    ("atomic_add", "NTBX_AMO_FADD", 0, "T value", "value", "0", AMO_STD),
    ("atomic_fetch_and", "NTBX_AMO_AND", 1, "T value", "value", "0", AMO_BIT),
    ("atomic_and", "NTBX_AMO_AND", 0, "T value", "value", "0", AMO_BIT),
    ("atomic_fetch_or", "NTBX_AMO_OR", 1, "T value", "value", "0", AMO_BIT),
    ("atomic_or", "NTBX_AMO_OR", 0, "T value", "value", "0", AMO_BIT),
    ("atomic_fetch_xor", "NTBX_AMO_XOR", 1, "T value", "value", "0", AMO_BIT),
    ("atomic_xor", "NTBX_AMO_XOR", 0, "T value", "value", "0", AMO_BIT),
]
OLD = {"atomic_fetch": ("fetch", OLD_AMO_EXT),
       "atomic_set": ("set", OLD_AMO_EXT),
       "atomic_swap": ("swap", OLD_AMO_EXT),
       "atomic_compare_swap": ("cswap", OLD_AMO_STD),
       "atomic_fetch_inc": ("finc", OLD_AMO_STD),
       "atomic_inc": ("inc", OLD_AMO_STD),
       "atomic_fetch_add": ("fadd", OLD_AMO_STD),
       "atomic_add": ("add", OLD_AMO_STD)}


def amo_body(cty, op, fetch, val, cond, ctxv, dest="dest"):
    b = "\tuint64_t v_ = 0, c_ = 0, r_;\n"
    if val == "1":
        b += "\t{ %s one_ = 1; memcpy(&v_, &one_, sizeof one_); }\n" % cty
    elif val != "0":
        b += "\tmemcpy(&v_, &%s, sizeof(%s));\n" % (val, cty)
    elif op == "NTBX_AMO_FADD":
        b += "\t{ %s one_ = 1; memcpy(&v_, &one_, sizeof one_); }\n" % cty
    if cond != "0":
        b += "\tmemcpy(&c_, &%s, sizeof(%s));\n" % (cond, cty)
    if not fetch:   # no reply needed from a PE reached by requests
        op = "%s | NTBX_AMO_NOFETCH" % op
    b += ("\tr_ = ntbx_sh_amo(%s, %s, (void *)%s, sizeof(%s), v_, c_, pe);\n"
          % (ctxv, op, dest, cty))
    if fetch:
        b += "\t%s out_;\n\tmemcpy(&out_, &r_, sizeof out_);\n\treturn out_;\n" % cty
    else:
        b += "\t(void)r_;\n"
    return b


for name, op, fetch, rest, val, cond, types in AMOS:
    for n in types:
        cty = ct(n)
        r = rest.replace("T ", cty + " ")
        dty = "const %s" % cty if name == "atomic_fetch" else cty
        args = "%s *dest%s, int pe" % (dty, (", " + r) if r else "")
        ret = cty if fetch else "void"
        for pre, ca, cv in (("shmem_", "", "SHMEM_CTX_DEFAULT"),
                            ("shmem_ctx_", "shmem_ctx_t ctx, ", "ctx")):
            fn = "%s%s_%s" % (pre, n, name)
            proto(ret, fn, ca + args)
            define(ret, fn, ca + args, amo_body(cty, op, fetch, val, cond, cv))
            if fetch:  # the 1.5 non-blocking fetching AMOs
                nargs = "%s *fetch, %s" % (cty, args)
                fn = "%s%s_%s_nbi" % (pre, n, name)
                proto("void", fn, ca + nargs)
                body = amo_body(cty, op, 1, val, cond, cv).replace(
                    "\treturn out_;\n", "\t*fetch = out_;\n")
                define("void", fn, ca + nargs, body)
        if name in OLD and n in OLD[name][1]:
            fn = "shmem_%s_%s" % (n, OLD[name][0])
            proto(ret, fn, args)
            define(ret, fn, args,
                   amo_body(cty, op, fetch, val, cond, "SHMEM_CTX_DEFAULT"))

# --------------------------------------------------- point-to-point sync
src = SRC["sync"]
CMPS = "\tswitch (cmp) {\n" + "".join(
    "\tcase SHMEM_CMP_%s: return a %s b;\n" % (k, o)
    for k, o in (("EQ", "=="), ("NE", "!="), ("GT", ">"), ("GE", ">="),
                 ("LT", "<"), ("LE", "<="))) + \
    "\tdefault: ntbx_sh_bad_cmp(cmp); return 1;\n\t}\n"
src.append("/* where the next *_any scan starts (see body_any) */\n"
           "static _Thread_local size_t any_next;\n")
for n in SYNC:
    cty = ct(n)
    src.append("static inline int cmp_%s(%s a, int cmp, %s b)\n{\n%s}\n"
               % (n, cty, cty, CMPS))
    src.append("static inline %s ld_%s(%s *p)\n{\n"
               "\treturn __atomic_load_n((volatile %s *)p, __ATOMIC_ACQUIRE);\n}\n"
               % (cty, n, cty, cty))
    P = "shmem_%s_" % n
    a = "%s *ivar, int cmp, %s cmp_value" % (cty, cty)
    proto("void", P + "wait_until", a)
    define("void", P + "wait_until", a,
           "\tuint64_t s_ = 0;\n\twhile (!cmp_%s(ld_%s(ivar), cmp, cmp_value))\n"
           "\t\tntbx_sh_spin_on(&s_, ivar);\n\tntbx_sh_spin_done(&s_);\n" % (n, n))
    proto("int", P + "test", a)
    define("int", P + "test", a,
           "\tntbx_sh_progress();\n"
           "\treturn cmp_%s(ld_%s(ivar), cmp, cmp_value);\n" % (n, n))
    # _all/_any/_some with one value or a vector of values
    for vec in (0, 1):
        V = "_vector" if vec else ""
        cv = "%s%s" % ("const " if vec else "", cty + (" *cmp_values" if vec else " cmp_value"))
        val = "cmp_values[i]" if vec else "cmp_value"
        base = "%s *ivars, size_t nelems, const int *status, int cmp, %s" % (cty, cv)
        tst = "(status && status[i]) || cmp_%s(ld_%s(&ivars[i]), cmp, %s)" % (n, n, val)
        one = "cmp_%s(ld_%s(&ivars[i]), cmp, %s)" % (n, n, val)
        # test_all: 1 if all (non-excluded) satisfy
        body_all = ("\tfor (size_t i = 0; i < nelems; i++)\n\t\tif (!(%s))\n"
                    "\t\t\treturn 0;\n\treturn 1;\n" % tst)
        proto("int", P + "test_all" + V, base)
        define("int", P + "test_all" + V, base, "\tntbx_sh_progress();\n" + body_all)
        proto("void", P + "wait_until_all" + V, base)
        define("void", P + "wait_until_all" + V, base,
               "\tuint64_t s_ = 0;\n\tfor (size_t i = 0; i < nelems; i++)\n"
               "\t\twhile (!(%s))\n\t\t\tntbx_sh_spin(&s_);\n"
               "\tntbx_sh_spin_done(&s_);\n" % tst)
        # Start after the index returned last (per thread), so a program
        # that re-arms the lowest ready index cannot starve the others.
        body_any = ("\tsize_t i = nelems ? any_next %% nelems : 0;\n"
                    "\tfor (size_t k_ = 0; k_ < nelems; k_++, i = i + 1 == nelems ? 0 : i + 1)\n"
                    "\t\tif (!(status && status[i]) && %s) {\n"
                    "\t\t\tany_next = i + 1;\n\t\t\treturn i;\n\t\t}\n"
                    "\treturn SIZE_MAX;\n" % one)
        define("static size_t", "any_%s%s" % (n, V), base, body_any)
        proto("size_t", P + "test_any" + V, base)
        cargs = "ivars, nelems, status, cmp, %s" % ("cmp_values" if vec else "cmp_value")
        define("size_t", P + "test_any" + V, base,
               "\tntbx_sh_progress();\n\treturn any_%s%s(%s);\n" % (n, V, cargs))
        proto("size_t", P + "wait_until_any" + V, base)
        define("size_t", P + "wait_until_any" + V, base,
               "\tuint64_t s_ = 0;\n\tsize_t r_;\n\tint live_ = 0;\n"
               "\tfor (size_t i = 0; i < nelems; i++)\n\t\tlive_ |= !(status && status[i]);\n"
               "\tif (!live_)\n\t\treturn SIZE_MAX;\n"
               "\twhile ((r_ = any_%s%s(%s)) == SIZE_MAX)\n\t\tntbx_sh_spin(&s_);\n"
               "\tntbx_sh_spin_done(&s_);\n\treturn r_;\n" % (n, V, cargs))
        sbase = ("%s *ivars, size_t nelems, size_t *indices, const int *status, "
                 "int cmp, %s" % (cty, cv))
        body_some = ("\tsize_t k_ = 0;\n\tfor (size_t i = 0; i < nelems; i++)\n"
                     "\t\tif (!(status && status[i]) && %s)\n"
                     "\t\t\tindices[k_++] = i;\n\treturn k_;\n" % one)
        define("static size_t", "some_%s%s" % (n, V), sbase, body_some)
        scargs = "ivars, nelems, indices, status, cmp, %s" % ("cmp_values" if vec else "cmp_value")
        proto("size_t", P + "test_some" + V, sbase)
        define("size_t", P + "test_some" + V, sbase,
               "\tntbx_sh_progress();\n\treturn some_%s%s(%s);\n" % (n, V, scargs))
        proto("size_t", P + "wait_until_some" + V, sbase)
        define("size_t", P + "wait_until_some" + V, sbase,
               "\tuint64_t s_ = 0;\n\tsize_t r_;\n\tint live_ = 0;\n"
               "\tfor (size_t i = 0; i < nelems; i++)\n\t\tlive_ |= !(status && status[i]);\n"
               "\tif (!live_)\n\t\treturn 0;\n"
               "\twhile ((r_ = some_%s%s(%s)) == 0)\n\t\tntbx_sh_spin(&s_);\n"
               "\tntbx_sh_spin_done(&s_);\n\treturn r_;\n" % (n, V, scargs))
    if n in ("short", "int", "long", "longlong"):
        a = "%s *ivar, %s cmp_value" % (cty, cty)
        proto("void", P + "wait", a)
        define("void", P + "wait", a,
               "\tshmem_%s_wait_until(ivar, SHMEM_CMP_NE, cmp_value);\n" % n)

# ------------------------------------------------------------ reductions
src = SRC["coll"]
# Two element-wise loops per (type, op), over restrict pointers (the library
# never combines a buffer with itself) and with unconditional stores (max
# and min as selects), so that the compiler vectorises every integer and
# float loop; shmem_typed_coll.c is compiled with the dynamic vector cost
# model (CMakeLists.txt), as -O2's cheap model leaves loops of unknown length.
# comb_T_OP(a, b): a = a OP b; comb3_T_OP(o, a, b): o = a OP b, in one pass
# (a ring reduction writes a partial result straight into the next PE's
# buffer).  Both go into one struct ntbx_red_op (shmem_int.h).
OPEXPR = {"and": "a[i] &= b[i];", "or": "a[i] |= b[i];", "xor": "a[i] ^= b[i];",
          "max": "a[i] = b[i] > a[i] ? b[i] : a[i];",
          "min": "a[i] = b[i] < a[i] ? b[i] : a[i];",
          "sum": "a[i] += b[i];", "prod": "a[i] *= b[i];"}
OPEXPR3 = {"and": "o[i] = a[i] & b[i];", "or": "o[i] = a[i] | b[i];",
           "xor": "o[i] = a[i] ^ b[i];",
           "max": "o[i] = b[i] > a[i] ? b[i] : a[i];",
           "min": "o[i] = b[i] < a[i] ? b[i] : a[i];",
           "sum": "o[i] = a[i] + b[i];", "prod": "o[i] = a[i] * b[i];"}
combs = set()


def comb(n, op):
    if (n, op) not in combs:
        combs.add((n, op))
        cty = ct(n)
        src.append("static void comb_%s_%s(void *restrict a_, const void *restrict b_,"
                   " size_t n)\n{\n"
                   "\t%s *restrict a = a_;\n\tconst %s *restrict b = b_;\n"
                   "\tfor (size_t i = 0; i < n; i++)\n\t\t%s\n}\n"
                   % (n, op, cty, cty, OPEXPR[op]))
        src.append("static void comb3_%s_%s(void *restrict o_, const void *restrict a_,"
                   " const void *restrict b_, size_t n)\n{\n"
                   "\t%s *restrict o = o_;\n"
                   "\tconst %s *restrict a = a_, *restrict b = b_;\n"
                   "\tfor (size_t i = 0; i < n; i++)\n\t\t%s\n}\n"
                   % (n, op, cty, cty, OPEXPR3[op]))
        # exact: integer types give the same bits in any order of
        # combination (floating point sums, products and even max/min
        # with NaNs do not)
        exact = 0 if n in ("float", "double", "longdouble", "complexf",
                           "complexd") else 1
        src.append("static const struct ntbx_red_op rop_%s_%s = { comb_%s_%s, "
                   "comb3_%s_%s, %d };\n" % ((n, op) * 3 + (exact,)))
    return "&rop_%s_%s" % (n, op)


for op, types in RED_OPS.items():
    for n in types:
        cty = ct(n)
        f = comb(n, op)
        a = ("shmem_team_t team, %s *dest, const %s *source, size_t nreduce"
             % (cty, cty))
        fn = "shmem_%s_%s_reduce" % (n, op)
        proto("int", fn, a)
        define("int", fn, a, "\treturn ntbx_sh_reduce(team, dest, source, nreduce, "
               "sizeof(%s), %s);\n" % (cty, f))
# Scans (1.6): sum over the types of the sum reduction.
SCAN_TYPES = RED_OPS["sum"]
for n in SCAN_TYPES:
    cty = ct(n)
    f = comb(n, "sum")
    for kind, excl in (("inscan", 0), ("exscan", 1)):
        a = ("shmem_team_t team, %s *dest, const %s *source, size_t nelems"
             % (cty, cty))
        fn = "shmem_%s_sum_%s" % (n, kind)
        proto("int", fn, a)
        define("int", fn, a, "\treturn ntbx_sh_scan(team, dest, source, nelems, "
               "sizeof(%s), %s, %d);\n" % (cty, f, excl))
for op, types in OLD_RED.items():
    for n in types:
        cty = ct(n)
        f = comb(n, op)
        a = ("%s *dest, const %s *source, int nreduce, int PE_start, "
             "int logPE_stride, int PE_size, %s *pWrk, long *pSync"
             % (cty, cty, cty))
        fn = "shmem_%s_%s_to_all" % (n, op)
        proto("void", fn, a)
        define("void", fn, a, "\t(void)pWrk;\n\tntbx_sh_reduce_aset(dest, source, "
               "nreduce, sizeof(%s), %s, PE_start, logPE_stride, PE_size, pSync);\n"
               % (cty, f))

# ---------------------------------------------- typed data collectives
for cty, n, _ in RMA:
    for coll in ("broadcast", "collect", "fcollect", "alltoall"):
        if coll == "broadcast":
            a = ("shmem_team_t team, %s *dest, const %s *source, size_t nelems, "
                 "int PE_root" % (cty, cty))
            call = ("ntbx_sh_broadcast(team, dest, source, nelems * sizeof(%s), "
                    "PE_root)" % cty)
        else:
            a = ("shmem_team_t team, %s *dest, const %s *source, size_t nelems"
                 % (cty, cty))
            call = "ntbx_sh_%s(team, dest, source, nelems * sizeof(%s))" % (coll, cty)
        fn = "shmem_%s_%s" % (n, coll)
        proto("int", fn, a)
        define("int", fn, a, "\treturn %s;\n" % call)
    a = ("shmem_team_t team, %s *dest, const %s *source, ptrdiff_t dst, "
         "ptrdiff_t sst, size_t nelems" % (cty, cty))
    fn = "shmem_%s_alltoalls" % n
    proto("int", fn, a)
    define("int", fn, a, "\treturn ntbx_sh_alltoalls(team, dest, source, dst, sst, "
           "nelems, sizeof(%s));\n" % cty)

# --------------------------------------------------------- C11 _Generic
NO_ROUTINE = "ntbx_shmem_no_typed_routine_for_this_argument_type"


def G(macro, infix, names, argsig, key, ctx_variant=True, ptr_const=False):
    """macro(args) -> shmem_<type>_<infix>; ctx form has one more arg.

    Every type of `names` (the same list the typed routines come from) is
    selectable.  The basic C types are one _Generic; each stdint/stddef
    alias (int32_t, size_t, ...) is a _Generic of its own in the default
    branch of the one before, because an alias may be the same type as a
    basic one (int32_t is int) or as another alias (int64_t and ptrdiff_t
    are long), and one _Generic may not name a type twice.  Where an alias
    is a listed basic type the basic routine is chosen: the same type.  A
    type not in the list selects NO_ROUTINE, declared without parameters,
    so the call does not compile."""
    nargs = len(argsig)
    consts = ("", "const ") if ptr_const else ("",)

    def assoc(pre, ns):
        return ", ".join("%s%s *: %s%s_%s" % (c, ct(n), pre, n, infix)
                         for n in ns for c in consts)

    def sel(pre, k):
        e = NO_ROUTINE
        for n in reversed([n for n in names if T[n][1]]):
            e = "_Generic(&*(%s), %s, default: %s)" % (k, assoc(pre, [n]), e)
        basic = [n for n in names if not T[n][1]]
        if basic:
            e = "_Generic(&*(%s), %s, default: %s)" % (k, assoc(pre, basic), e)
        return e
    a = ", ".join(argsig)
    if ctx_variant:
        gen.append("#define ntbx_g_%s_%d(%s) %s(%s)" % (macro, nargs, a, sel("shmem_", key), a))
        gen.append("#define ntbx_g_%s_%d(ctx, %s) %s(ctx, %s)" % (
            macro, nargs + 1, a, sel("shmem_ctx_", key), a))
        gen.append("#define %s(...) NTBX_G_CAT(ntbx_g_%s_, NTBX_G_NARGS(__VA_ARGS__))(__VA_ARGS__)"
                   % (macro, macro))
    else:
        gen.append("#define %s(%s) %s(%s)" % (macro, a, sel("shmem_", key), a))


rma_names = [n for _, n, _ in RMA]
G("shmem_put", "put", rma_names, ["d", "s", "n", "pe"], "d")
G("shmem_get", "get", rma_names, ["d", "s", "n", "pe"], "d")
G("shmem_put_nbi", "put_nbi", rma_names, ["d", "s", "n", "pe"], "d")
G("shmem_get_nbi", "get_nbi", rma_names, ["d", "s", "n", "pe"], "d")
G("shmem_iput", "iput", rma_names, ["d", "s", "dst", "sst", "n", "pe"], "d")
G("shmem_iget", "iget", rma_names, ["d", "s", "dst", "sst", "n", "pe"], "d")
G("shmem_ibput", "ibput", rma_names, ["d", "s", "dst", "sst", "b", "nb", "pe"], "d")
G("shmem_ibget", "ibget", rma_names, ["d", "s", "dst", "sst", "b", "nb", "pe"], "d")
G("shmem_put_signal", "put_signal", rma_names,
  ["d", "s", "n", "sa", "sg", "so", "pe"], "d")
G("shmem_put_signal_nbi", "put_signal_nbi", rma_names,
  ["d", "s", "n", "sa", "sg", "so", "pe"], "d")
G("shmem_p", "p", rma_names, ["d", "v", "pe"], "d")
G("shmem_g", "g", rma_names, ["s", "pe"], "s", ptr_const=True)
for name, op, fetch, rest, val, cond, types in AMOS:
    extra = [x.split()[-1] for x in rest.split(",")] if rest else []
    G("shmem_" + name, name, types, ["d"] + extra + ["pe"], "d",
      ptr_const=(name == "atomic_fetch"))
    if fetch:
        G("shmem_" + name + "_nbi", name + "_nbi", types,
          ["f", "d"] + extra + ["pe"], "d", ptr_const=(name == "atomic_fetch"))
# deprecated generic AMO names (shmem_fadd(dest, value, pe), ...)
for name, op, fetch, rest, val, cond, types in AMOS:
    if name in OLD:
        old, otypes = OLD[name]
        extra = [x.split()[-1] for x in rest.split(",")] if rest else []
        G("shmem_" + old, old, otypes, ["d"] + extra + ["pe"], "d",
          ctx_variant=False, ptr_const=(old == "fetch"))
for w in ("wait_until", "test"):
    G("shmem_" + w, w, SYNC, ["i", "c", "v"], "i", ctx_variant=False)
for w in ("wait_until_all", "wait_until_any", "test_all", "test_any"):
    for V in ("", "_vector"):
        G("shmem_" + w + V, w + V, SYNC, ["i", "n", "st", "c", "v"], "i",
          ctx_variant=False)
for w in ("wait_until_some", "test_some"):
    for V in ("", "_vector"):
        G("shmem_" + w + V, w + V, SYNC, ["i", "n", "ix", "st", "c", "v"], "i",
          ctx_variant=False)
G("shmem_wait", "wait", ["short", "int", "long", "longlong"], ["i", "v"], "i",
  ctx_variant=False)
for op, types in RED_OPS.items():
    G("shmem_%s_reduce" % op, "%s_reduce" % op, types,
      ["t", "d", "s", "n"], "d", ctx_variant=False)
for kind in ("inscan", "exscan"):
    G("shmem_sum_" + kind, "sum_" + kind, SCAN_TYPES, ["t", "d", "s", "n"], "d",
      ctx_variant=False)
for coll in ("collect", "fcollect", "alltoall"):
    G("shmem_" + coll, coll, rma_names, ["t", "d", "s", "n"], "d", ctx_variant=False)
G("shmem_broadcast", "broadcast", rma_names, ["t", "d", "s", "n", "r"], "d",
  ctx_variant=False)
G("shmem_alltoalls", "alltoalls", rma_names, ["t", "d", "s", "dst", "sst", "n"],
  "d", ctx_variant=False)

# shmem_sync(team) (1.5) beside the deprecated shmem_sync(start, log, size, pSync)
gen.append("#define ntbx_g_shmem_sync_1(t) shmem_team_sync(t)")
gen.append("#define ntbx_g_shmem_sync_4(a, b, c, d) (shmem_sync)(a, b, c, d)")
gen.append("#define shmem_sync(...) NTBX_G_CAT(ntbx_g_shmem_sync_, "
           "NTBX_G_NARGS(__VA_ARGS__))(__VA_ARGS__)")

tmpl, out_h, out_c = sys.argv[1:4]
decls = "\n".join(hdr)
generic = ("#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L "
           "&& !defined(__cplusplus)\n"
           "#define NTBX_G_NARGS(...) NTBX_G_NARGS_(__VA_ARGS__, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)\n"
           "#define NTBX_G_NARGS_(a1, a2, a3, a4, a5, a6, a7, a8, a9, N, ...) N\n"
           "#define NTBX_G_CAT(a, b) NTBX_G_CAT_(a, b)\n"
           "#define NTBX_G_CAT_(a, b) a##b\n"
           "/* what a generic interface selects for a type it has no routine\n"
           " * for: no parameters, so the call is a compile-time error */\n"
           "void %s(void);\n" % NO_ROUTINE + "\n".join(gen) + "\n#endif\n")
with open(tmpl) as f:
    text = f.read()
text = text.replace("@NTBX_TYPED_DECLS@", decls + "\n\n" + generic)
with open(out_h, "w") as f:
    f.write(text)
# The profiling interface: pshmem_X for every shmem_X routine.  The shared
# library defines each as the same code (a linker-script assignment); the
# header declares them with __typeof__.
import re
names = []
for line in text.splitlines():
    if line.startswith("#") or line.startswith(" ") or line.startswith("\t"):
        continue
    m = re.match(r"^[A-Za-z_][\w \*]*?\b(shmem_\w+)\s*\(", line)
    if m and m.group(1) not in names:
        names.append(m.group(1))
if len(sys.argv) > 5:
    with open(sys.argv[4], "w") as f:
        f.write("/* pshmem.h -- the OpenSHMEM profiling interface (generated).\n"
                " * Each pshmem_X is the library's shmem_X, so a tool that defines\n"
                " * shmem_X can call pshmem_X (shared library only). */\n"
                "#ifndef NTBX_PSHMEM_H\n#define NTBX_PSHMEM_H\n#include <shmem.h>\n"
                "#ifdef __cplusplus\nextern \"C\" {\n#endif\n")
        for n in names:
            f.write("extern __typeof__(%s) p%s;\n" % (n, n))
        f.write("#ifdef __cplusplus\n}\n#endif\n#endif\n")
    with open(sys.argv[5], "w") as f:
        for n in names:
            f.write("p%s = %s;\n" % (n, n))
# shmemx.h's pre-1.6 SOS spellings (shmemx_int_ibput, shmemx_int_sum_inscan,
# ...): one alias per generated 1.6 routine, so they cannot drift.
if len(sys.argv) > 6:
    with open(sys.argv[6], "w") as f:
        f.write("/* shmemx_gen.h -- shmemx_ names of OpenSHMEM 1.6 routines, as\n"
                " * Sandia OpenSHMEM spelled them before 1.6 (generated). */\n"
                "#ifndef NTBX_SHMEMX_GEN_H\n#define NTBX_SHMEMX_GEN_H\n")
        for n in names:
            if re.search(r"_ib(put|get)\d*$|_sum_(in|ex)scan$", n):
                f.write("#define shmemx_%s shmem_%s\n" % (n[6:], n[6:]))
        f.write("#endif\n")
for area, what in AREAS.items():
    with open("%s_%s.c" % (out_c, area), "w") as f:
        f.write("/* Generated by gen_shmem.py from its type table: do not edit.\n"
                " * The typed %s. */\n"
                "#include <string.h>\n#include \"shmem_int.h\"\n\n" % what
                + "\n".join(SRC[area]))
