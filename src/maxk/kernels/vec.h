/* Vector helpers of maxk's C kernels: GCC's generic vector extensions as wide as the target allows (16, 8 or
   4 floats), so one source serves AVX-512, AVX2 and plain SSE or NEON. maxk.ckernels puts this folder on
   every kernel's include path and rebuilds a kernel when a header it includes changes. */
#ifndef MAXK_VEC_H
#define MAXK_VEC_H
#include <stdint.h>
#include <string.h>

#if defined(__AVX512F__)
#define VW 16
#elif defined(__AVX__)
#define VW 8
#else
#define VW 4
#endif
typedef float vf __attribute__((vector_size(VW * 4)));
typedef int32_t vi __attribute__((vector_size(VW * 4)));
static inline __attribute__((always_inline)) vf ld(const float *p) { vf v; memcpy(&v, p, sizeof v); return v; }
static inline __attribute__((always_inline)) void st(float *p, vf v) { memcpy(p, &v, sizeof v); }

static inline __attribute__((always_inline)) vf vsel(vi mask, vf a, vf b) {
    return (vf)(((vi)a & mask) | ((vi)b & ~mask));
}

/* exp(x), Cephes-style: 2^n p(r) with n = round(x / ln 2), r = x - n ln 2 (ln 2 in two parts), p of
   degree 6; x < -87 (and -inf) gives 0, x > 88 is taken as 88. */
static inline __attribute__((always_inline)) vf vexp(vf x) {
    const vf zero = {0};
    const vf lo = zero - 87.0f, hi = zero + 88.0f;
    vi under = x < lo;
    vf xc = vsel(under, lo, vsel(x > hi, hi, x));
    vf t = xc * 1.44269504088896341f + 12582912.0f;
    vf n = t - 12582912.0f;
    vf r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    vf p = zero + 1.9875691500E-4f;
    p = p * r + 1.3981999507E-3f;
    p = p * r + 8.3334519073E-3f;
    p = p * r + 4.1665795894E-2f;
    p = p * r + 1.6666665459E-1f;
    p = p * r + 5.0000001201E-1f;
    p = p * r * r + r + 1.0f;
    vi ni = __builtin_convertvector(n, vi);
    vf scale = (vf)((ni + 127) << 23);
    return vsel(under, zero, p * scale);
}

static inline __attribute__((always_inline)) float hsum(vf v) {
    float s = 0.0f;
    for (int i = 0; i < VW; i++) s += v[i];
    return s;
}

#endif
