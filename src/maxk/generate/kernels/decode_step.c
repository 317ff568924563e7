/* One decode step of a Qwen2-family model for many sampled rows at once, float32, on a CPU.

   The arithmetic of maxk.generate.decode.QwenDecoder.step_logits (see its module docstring: shared prompt
   caches, rows grouped by prompt, generated keys and values per row), in one call instead of some fifty
   torch operations: the matrix products go to the BLAS that torch itself links (sgemm_, handed over by
   maxk.generate.native), everything else (RMS norms, RoPE, attention with its softmax, SiLU) is here.
   Vectors are GCC's generic vector extensions, as wide as the target allows (16, 8 or 4 floats), so one
   source serves AVX-512, AVX2 and plain SSE or NEON; the sums run in a fixed order for a given width.
   exp is a Cephes-style polynomial (relative error about 1e-7). The logits match torch's within float
   rounding (tests/generate/test_generate_native.py); maxk.generate.native builds this file. */
#include <math.h>
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

static void rms_norm(const float *x, const float *w, float *out, int rows, int dim, float eps) {
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (int64_t)r * dim;
        float ss = 0.0f;
        for (int i = 0; i < dim; i++) ss += xr[i] * xr[i];
        float inv = 1.0f / sqrtf(ss / (float)dim + eps);
        float *o = out + (int64_t)r * dim;
        for (int i = 0; i < dim; i++) o[i] = w[i] * (xr[i] * inv);
    }
}

static void silu_mul(const float *gu, float *out, int rows, int inter) {
    for (int r = 0; r < rows; r++) {
        const float *g = gu + (int64_t)r * 2 * inter, *u = g + inter;
        float *o = out + (int64_t)r * inter;
        for (int i = 0; i < inter; i += VW) {
            vf gv, uv;
            gv = ld(g + i);
            uv = ld(u + i);
            vf e = vexp(-gv);  /* silu(g) = g / (1 + exp(-g)) */
            vf s = gv / (1.0f + e);
            vf res = s * uv;
            st(o + i, res);
        }
    }
}

#ifndef HEAD_DIM
#define HEAD_DIM 32
#endif
#define D HEAD_DIM
#define DV (D / VW)
#define QB 4   /* queries a block */
#define WB 4   /* key vectors a block */

/* S[q, w] = sum_i Q[q, i] Kt[i, w] for q < nq and w < n rounded up to 16 (Kt's rows of stride ldk hold
   that many columns): a prompt's keys against all its rows' queries, blocked QB queries x WB vectors. */
static void scores(const float *Q, int nq, const float *Kt, int ldk, int n, float *S, int lds) {
    int n16 = (n + 15) & ~15;
    int q = 0;
    for (; q + QB <= nq; q += QB) {
        int w = 0;
        for (; w + VW * WB <= n16; w += VW * WB) {
            vf acc[QB][WB] = {{{0}}};
            for (int i = 0; i < D; i++) {
                vf k[WB];
#pragma GCC unroll 4
                for (int b = 0; b < WB; b++) k[b] = ld(Kt + (int64_t)i * ldk + w + VW * b);
#pragma GCC unroll 4
                for (int a = 0; a < QB; a++) {
                    float qa = Q[(q + a) * D + i];
#pragma GCC unroll 4
                    for (int b = 0; b < WB; b++) acc[a][b] += qa * k[b];
                }
            }
            for (int a = 0; a < QB; a++)
                for (int b = 0; b < WB; b++) st(S + (int64_t)(q + a) * lds + w + VW * b, acc[a][b]);
        }
        for (; w < n16; w += VW) {
            vf acc[QB] = {{0}};
            for (int i = 0; i < D; i++) {
                vf k = ld(Kt + (int64_t)i * ldk + w);
#pragma GCC unroll 4
                for (int a = 0; a < QB; a++) acc[a] += Q[(q + a) * D + i] * k;
            }
            for (int a = 0; a < QB; a++) st(S + (int64_t)(q + a) * lds + w, acc[a]);
        }
    }
    for (; q < nq; q++)
        for (int w = 0; w < n16; w += VW) {
            vf acc = {0};
            for (int i = 0; i < D; i++) acc += Q[q * D + i] * ld(Kt + (int64_t)i * ldk + w);
            st(S + (int64_t)q * lds + w, acc);
        }
}

/* O[q, :] += sum_{w < n} P[q, w] V[w, :]  (V [n, D]). */
static void mix(const float *P, int nq, int ldp, int n, const float *V, float *O) {
    int q = 0;
    for (; q + QB <= nq; q += QB) {
        vf acc[QB][DV];
        for (int a = 0; a < QB; a++)
            for (int b = 0; b < DV; b++) acc[a][b] = ld(O + (q + a) * D + VW * b);
        for (int w = 0; w < n; w++) {
            const float *vr = V + (int64_t)w * D;
#pragma GCC unroll 8
            for (int b = 0; b < DV; b++) {
                vf v = ld(vr + VW * b);
#pragma GCC unroll 4
                for (int a = 0; a < QB; a++) acc[a][b] += P[(int64_t)(q + a) * ldp + w] * v;
            }
        }
        for (int a = 0; a < QB; a++)
            for (int b = 0; b < DV; b++) st(O + (q + a) * D + VW * b, acc[a][b]);
    }
    for (; q < nq; q++) {
        vf acc[DV];
        for (int b = 0; b < DV; b++) acc[b] = ld(O + q * D + VW * b);
        for (int w = 0; w < n; w++) {
            float pw = P[(int64_t)q * ldp + w];
#pragma GCC unroll 8
            for (int b = 0; b < DV; b++) acc[b] += pw * ld(V + (int64_t)w * D + VW * b);
        }
        for (int b = 0; b < DV; b++) st(O + q * D + VW * b, acc[b]);
    }
}

/* S[q, t] = sum_i Q[q, i] K[t, i] for one row's own keys, tiled [T / VW, D, VW] (t < n rounded up to VW). */
static void own_scores(const float *Q, int nq, const float *Kb, int n, float *S, int lds) {
    for (int t = 0; t < n; t += VW) {
        const float *blk = Kb + (int64_t)(t / VW) * D * VW;
        vf acc[8] = {{0}};
        for (int i = 0; i < D; i++) {
            vf k = ld(blk + i * VW);
            for (int q = 0; q < nq; q++) acc[q] += Q[q * D + i] * k;
        }
        for (int q = 0; q < nq; q++) st(S + (int64_t)q * lds + t, acc[q]);
    }
}

/* O[q, :] += sum_{t < n} P[q, t] V[t, :] for one row's g queries (V [n, D]). */
static void own_mix(const float *P, int nq, int ldp, int n, const float *V, float *O) {
    vf acc[8][DV];
    for (int q = 0; q < nq; q++)
        for (int b = 0; b < DV; b++) acc[q][b] = ld(O + q * D + VW * b);
    for (int t = 0; t < n; t++) {
        const float *vr = V + (int64_t)t * D;
#pragma GCC unroll 8
        for (int b = 0; b < DV; b++) {
            vf v = ld(vr + VW * b);
            for (int q = 0; q < nq; q++) acc[q][b] += P[(int64_t)q * ldp + t] * v;
        }
    }
    for (int q = 0; q < nq; q++)
        for (int b = 0; b < DV; b++) st(O + q * D + VW * b, acc[q][b]);
}

static void rope(const float *x, const float *c, const float *s, int d, float scale, float *out) {
    int half = d / 2;
    for (int i = 0; i < half; i++) out[i] = (x[i] * c[i] - x[i + half] * s[i]) * scale;
    for (int i = half; i < d; i++) out[i] = (x[i] * c[i] + x[i - half] * s[i]) * scale;
}

/* One layer's attention for every running row (rows grouped by prompt: pidx nondecreasing).
   qkv [rows, (h + 2 kvh) d]; cos, sin [rows, d];
   own_kt [kvh, cap, T / VW, D, VW] (keys in tiles of VW steps, transposed; T a multiple of 16), own_v [kvh, cap, T, d];
   pk_t [kvh, P, d, W16] (W16: W rounded up to 16), pv [kvh, P, W, d]; pidx [rows], plen [P];
   out [rows, h d]; scratch: see attention_scratch. */
static int64_t attention_scratch(int per_prompt, int g, int d, int W, int T) {
    int64_t nq = (int64_t)per_prompt * g;
    return nq * d * 2 + nq + nq * (((W + T + 15) & ~15) + 16) + 64;
}

static void attention(const float *qkv, const float *cos_, const float *sin_, float *own_kt, float *own_v,
               int cap, int T, int step, const float *pk_t, const float *pv, const int64_t *pidx,
               const int64_t *plen, int P, int W, int rows, int h, int kvh, int d, float scale,
               float *out, float *scratch, int per_prompt) {
    int g = h / kvh, stride = (h + 2 * kvh) * d;
    int lds = ((W + T + 15) & ~15) + 16, W16 = (W + 15) & ~15;
    float *Q = scratch, *O = Q + (int64_t)per_prompt * g * D, *INV = O + (int64_t)per_prompt * g * D,
          *S = INV + (int64_t)per_prompt * g;
    /* this step's keys (rotated) and values into the rows' caches */
    for (int r = 0; r < rows; r++) {
        const float *row = qkv + (int64_t)r * stride;
        for (int j = 0; j < kvh; j++) {
            float k[128];
            rope(row + (h + j) * d, cos_ + (int64_t)r * d, sin_ + (int64_t)r * d, d, 1.0f, k);
            float *kt = own_kt + ((int64_t)j * cap + r) * D * T + (int64_t)(step / VW) * D * VW + step % VW;
            if (step % VW == 0) memset(kt, 0, sizeof(float) * D * VW);  /* the tile's later steps: 0, not garbage */
            for (int i = 0; i < D; i++) kt[i * VW] = k[i];
            memcpy(own_v + (((int64_t)j * cap + r) * T + step) * d, row + (h + kvh + j) * d, d * 4);
        }
    }
   
    int own = step + 1;
    for (int start = 0; start < rows;) {
        int p = (int)pidx[start], end = start;
        while (end < rows && pidx[end] == p) end++;
        int nr = end - start, nq = nr * g, L = (int)plen[p], n = L + own, n16 = (n + 15) & ~15;
        for (int j = 0; j < kvh; j++) {
            for (int r = start; r < end; r++)
                for (int gi = 0; gi < g; gi++)
                    rope(qkv + (int64_t)r * stride + (j * g + gi) * d, cos_ + (int64_t)r * d,
                         sin_ + (int64_t)r * d, d, scale, Q + ((r - start) * g + gi) * d);
            scores(Q, nq, pk_t + ((int64_t)j * P + p) * d * W16, W16, L, S, lds);
            for (int r = start; r < end; r++) {
                const float *kt = own_kt + ((int64_t)j * cap + r) * D * T;
                int q0 = (r - start) * g;
                /* own keys: S[q, L + t]; a scratch row of 16 past the end takes the padding */
                own_scores(Q + q0 * D, g, kt, own, S + (int64_t)q0 * lds + L, lds);
            }
            for (int q = 0; q < nq; q++) {
                float *srow = S + (int64_t)q * lds;
                for (int w = n; w < n16; w++) srow[w] = -INFINITY;
                vf mv = ld(srow);
                for (int w = VW; w < n16; w += VW) {
                    vf xv = ld(srow + w);
                    mv = vsel(xv > mv, xv, mv);
                }
                float m = mv[0];
                for (int i = 1; i < VW; i++) m = mv[i] > m ? mv[i] : m;
                vf sv = {0};
#pragma GCC unroll 4
                for (int w = 0; w < n16; w += VW) {
                    vf e = vexp(ld(srow + w) - m);
                    sv += e;
                    st(srow + w, e);
                }
                INV[q] = 1.0f / hsum(sv);
            }
            memset(O, 0, (size_t)nq * d * 4);
            mix(S, nq, lds, L, pv + ((int64_t)j * P + p) * W * d, O);
            for (int r = start; r < end; r++) {
                int q0 = (r - start) * g;
                own_mix(S + (int64_t)q0 * lds + L, g, lds, own, own_v + ((int64_t)j * cap + r) * T * D, O + q0 * D);
                for (int gi = 0; gi < g; gi++) {
                    float *o = out + (int64_t)r * h * D + (j * g + gi) * D;
                    const float *src = O + (q0 + gi) * D;
                    float inv = INV[q0 + gi];
                    for (int i = 0; i < D; i++) o[i] = src[i] * inv;
                }
            }
           
        }
        start = end;
    }
}

/* ---- the whole step ---- */
typedef void (*sgemm_fn)(const char *, const char *, const int *, const int *, const int *, const float *,
                         const float *, const int *, const float *, const int *, const float *, float *,
                         const int *);
static sgemm_fn SGEMM_ = 0;
void set_sgemm(void *f) { SGEMM_ = (sgemm_fn)f; }

/* Y[rows, out] = X[rows, in] W[out, in]^T + beta Y (row-major; BLAS is column-major: Y^T = W^T^T X^T) */
static void linear(const float *X, int rows, int in, const float *Wt, int out, float beta, float *Y) {
    const float one = 1.0f;
    SGEMM_("T", "N", &out, &rows, &in, &one, Wt, &in, X, &in, &beta, Y, &out);
}

enum { L_LN1, L_QKV_W, L_QKV_B, L_O_W, L_O_B, L_LN2, L_GU_W, L_DOWN_W, L_N };

/* model: [layers, hidden, inter, vocab, heads, kv_heads, embed, norm, lm_head, then L_N pointers a layer]
   (pointers as int64; a missing bias 0). caches: [layers, 4] pointers: own keys, own values, prompt keys
   (transposed, W16 wide), prompt values. rope: [positions, 2, D] cos then sin. */
void decode_step(const int64_t *model, float eps, float scale, const int64_t *caches, const int64_t *tokens,
                 const int64_t *positions, int rows, int step, int cap, int T, const float *rope_tab,
                 const int64_t *pidx, const int64_t *plen, int P, int W, int per_prompt, float *logits,
                 float *work) {
    int layers = (int)model[0], hid = (int)model[1], inter = (int)model[2], vocab = (int)model[3];
    int h = (int)model[4], kvh = (int)model[5];
    const float *embed = (const float *)model[6], *norm = (const float *)model[7],
                *lm_head = (const float *)model[8];
    int qkv_n = (h + 2 * kvh) * D;
    float *x = work, *xn = x + (int64_t)rows * hid, *qkv = xn + (int64_t)rows * hid,
          *att = qkv + (int64_t)rows * qkv_n, *gu = att + (int64_t)rows * h * D,
          *act = gu + (int64_t)rows * 2 * inter, *cs = act + (int64_t)rows * inter,
          *sn = cs + (int64_t)rows * D, *scratch = sn + (int64_t)rows * D;
    for (int r = 0; r < rows; r++) {
        memcpy(x + (int64_t)r * hid, embed + tokens[r] * hid, sizeof(float) * hid);
        memcpy(cs + (int64_t)r * D, rope_tab + positions[r] * 2 * D, sizeof(float) * D);
        memcpy(sn + (int64_t)r * D, rope_tab + positions[r] * 2 * D + D, sizeof(float) * D);
    }
    for (int li = 0; li < layers; li++) {
        const int64_t *Lp = model + 9 + li * L_N, *C = caches + li * 4;
        const float *qkv_b = (const float *)Lp[L_QKV_B], *o_b = (const float *)Lp[L_O_B];
        rms_norm(x, (const float *)Lp[L_LN1], xn, rows, hid, eps);
        for (int r = 0; r < rows; r++) {
            float *q = qkv + (int64_t)r * qkv_n;
            if (qkv_b) memcpy(q, qkv_b, sizeof(float) * qkv_n);
            else memset(q, 0, sizeof(float) * qkv_n);
        }
        linear(xn, rows, hid, (const float *)Lp[L_QKV_W], qkv_n, 1.0f, qkv);
        attention(qkv, cs, sn, (float *)C[0], (float *)C[1], cap, T, step, (const float *)C[2],
                  (const float *)C[3], pidx, plen, P, W, rows, h, kvh, D, scale, att, scratch, per_prompt);
        linear(att, rows, h * D, (const float *)Lp[L_O_W], hid, 1.0f, x);
        if (o_b)
            for (int r = 0; r < rows; r++)
                for (int i = 0; i < hid; i++) x[(int64_t)r * hid + i] += o_b[i];
        rms_norm(x, (const float *)Lp[L_LN2], xn, rows, hid, eps);
        linear(xn, rows, hid, (const float *)Lp[L_GU_W], 2 * inter, 0.0f, gu);
        silu_mul(gu, act, rows, inter);
        linear(act, rows, inter, (const float *)Lp[L_DOWN_W], hid, 1.0f, x);
    }
    rms_norm(x, norm, xn, rows, hid, eps);
    linear(xn, rows, hid, lm_head, vocab, 0.0f, logits);
}

int64_t decode_work(int rows, int hid, int inter, int h, int kvh, int per_prompt, int W, int T) {
    int64_t per_row = 2 * hid + (h + 2 * kvh) * D + h * D + 3 * inter + 2 * D;
    return rows * per_row + attention_scratch(per_prompt, h / kvh, D, W, T);
}
