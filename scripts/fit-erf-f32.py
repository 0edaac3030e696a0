#!/usr/bin/python3
"""Fits the coefficient table of AVX-512's float32 erf (x5_erf_tab in
src/ops/vmath_f32_avx512.h) and prints it as C, with each piece's largest
error over 20000 points (float32 evaluation emulated; the exhaustive check
over every float is tests/test_vmath.c's dense test and a one-off C loop).

Pieces of z = |x|: quarter octaves [2^k, 1.25 2^k) ... for k = -4..0 (table
entries 12..31: bits 21..25 of the float), eighths of [2, 4) (entries 0..7:
bits 20..24) and [0, 0.078125) (entry 12, b = 0). Each piece: a float b near
its centre whose erf lies within 0.002 ULP of a float c0, and c1..c5 of
p(y) = c0 + c1 y + ... + c5 y^5, y = z - b, fitted by least squares with
relative weight, reweighted (Lawson) towards the minimax error, rounded to
float one at a time, each later one refitted to the rounded earlier ones. The
first piece fits erf(z) - z with odd terms only (the kernel adds z last).

Needs Debian's python3-numpy and python3-mpmath. Usage: scripts/fit-erf-f32.py
"""
import math
import sys

import mpmath
import numpy as np

mpmath.mp.prec = 120
ZMAX = 3.96875  # the kernel's clamp: erf rounds to 1 from 3.92 on
erf = np.vectorize(math.erf)


def f32(v):
    return float(np.float32(v))


def ulp32(v):
    return float(np.spacing(np.float32(abs(v))))


def pieces():
    out = {12: (0.0, 0.078125)}
    for k in range(-4, 1):
        for q in range(4):
            idx = (((k + 127) & 7) << 2) | q
            if idx != 12:
                out[idx] = (2.0**k * (1 + q / 4), 2.0**k * (1 + (q + 1) / 4))
    for j in range(8):
        out[j] = (2 + j / 4, min(2 + (j + 1) / 4, ZMAX))
    return out


def choose_b(lo, hi):
    """A float b in the middle of [lo, hi) whose erf is nearest a float."""
    if lo == 0:
        return 0.0
    f0 = np.float32(math.erf((lo + hi) / 2))
    cands, a, c = [f0], f0, f0
    for _ in range(200):
        a, c = np.nextafter(a, np.float32(0)), np.nextafter(c, np.float32(2))
        cands += [a, c]
    best = None
    for fv in cands:
        if not 0 < float(fv) < 1:
            continue
        x = mpmath.erfinv(mpmath.mpf(float(fv)))
        if not lo + (hi - lo) * 0.3 <= x <= hi - (hi - lo) * 0.3:
            continue
        bf = np.float32(float(x))
        for bb in (np.nextafter(bf, np.float32(0)), bf, np.nextafter(bf, np.float32(9))):
            v = mpmath.erf(mpmath.mpf(float(bb)))
            d = abs(float(v - mpmath.mpf(f32(float(v))))) / ulp32(f32(float(v)))
            if best is None or d < best[0]:
                best = (d, float(bb))
        if best and best[0] < 0.002:
            break
    return best[1]


def fit(lo, hi, b, deg=5):
    n = 3000
    z = (lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.pi * (np.arange(n) + 0.5) / n)
    z = np.concatenate([z, [lo, hi]])
    if lo == 0:
        z = z[z > 1e-6]
    y, w = z - b, 1 / np.abs(erf(z))
    f = erf(z) - (z if b == 0 else 0)
    c = [0.0] * (deg + 1)
    if b != 0:
        c[0] = f32(float(mpmath.erf(mpmath.mpf(b))))
    for j in range(1, deg + 1):
        if b == 0 and j % 2 == 0:
            continue
        r = f - sum(c[i] * y**i for i in range(j))
        js = [i for i in range(j, deg + 1) if b != 0 or i % 2]
        a = np.stack([y**i for i in js], 1)
        ww = w.copy()
        for it in range(30 if b else 1):
            sol, *_ = np.linalg.lstsq(a * ww[:, None], r * ww, rcond=None)
            e = np.abs(a @ sol - r) * w
            ww = ww * (e / e.max() + 1e-3) ** 0.5
        c[j] = f32(sol[0])
    return c


def evaluate(c, y, small):
    """The kernel's Horner steps, each FMA rounded to float once."""
    p = np.float32(c[5])
    for i in (4, 3, 2, 1):
        p = np.float32(np.float64(p) * np.float64(y) + np.float64(c[i]))
    last = np.float64(y) if small else np.float64(c[0])
    return np.float32(np.float64(p) * np.float64(y) + last)


def hexf(v):
    if v == 0:
        return "0"
    m, e = float(np.float32(v)).hex().split("p")
    m = m.rstrip("0").rstrip(".")
    return m + "p" + e + "f"


def main():
    tab = {}
    for idx, (lo, hi) in sorted(pieces().items()):
        b = choose_b(lo, hi)
        c = fit(lo, hi, b)
        zs = np.linspace(lo, hi, 20001)[:-1].astype(np.float32)
        zs = zs[zs > 0]
        got = evaluate(c, (zs - np.float32(b)).astype(np.float32), b == 0).astype(np.float64)
        want = erf(zs.astype(np.float64))
        err = np.abs(got - want) / np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
        print(f"/* entry {idx:2d} [{lo:g}, {hi:g}): max {err.max():.3f} ULP */", file=sys.stderr)
        tab[idx] = [b] + c
    for r, name in enumerate(["b", "c0", "c1", "c2", "c3", "c4", "c5"]):
        vals = [hexf(tab[i][r]) if i in tab else "0" for i in range(32)]
        print("    {/* %s */" % name)
        for k in range(0, 32, 6):
            print("     " + ", ".join(vals[k:k + 6]) + ("}," if k + 6 >= 32 else ","))


if __name__ == "__main__":
    main()
