/* One decode step of a Qwen2-family model for many sampled rows at once, float32, on a CPU.

   The arithmetic of maxk.generate.decode.QwenDecoder.step_logits (see its module docstring: shared prompt
   caches, rows grouped by prompt, generated keys and values per row), in one call instead of some fifty
   torch operations: the matrix products go to the BLAS that torch itself links (sgemm_, handed over by
   maxk.generate.native), everything else (RMS norms, RoPE, attention with its softmax, SiLU) is here.
   Vectors are GCC's generic vector extensions, as wide as the target allows (16, 8 or 4 floats), so one
   source serves AVX-512, AVX2 and plain SSE or NEON; the sums run in a fixed order for a given width.
   exp is a Cephes-style polynomial (relative error about 1e-7). The logits match torch's within float
   rounding (tests/generate/test_generate_native.py); maxk.generate.native builds this file. Below the
   step: the prefill of whole prompts in the same arithmetic, one step's draws and records, and the
   compaction of the rows' caches in place. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "blas.h"
#include "vec.h"

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

/* A row of scores S[0 .. n) into exp(S - max S) in place, S[n .. end) masked to 0 (end a multiple of VW,
   at most the row's room); returns 1 / the sum of the exps. */
static inline float softmax_row(float *srow, int n, int end) {
    for (int w = n; w < end; w++) srow[w] = -INFINITY;
    vf mv = ld(srow);
    for (int w = VW; w < end; w += VW) {
        vf xv = ld(srow + w);
        mv = vsel(xv > mv, xv, mv);
    }
    float m = mv[0];
    for (int i = 1; i < VW; i++) m = mv[i] > m ? mv[i] : m;
    vf sv = {0};
#pragma GCC unroll 4
    for (int w = 0; w < end; w += VW) {
        vf e = vexp(ld(srow + w) - m);
        sv += e;
        st(srow + w, e);
    }
    return 1.0f / hsum(sv);
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
            for (int q = 0; q < nq; q++) INV[q] = softmax_row(S + (int64_t)q * lds, n, n16);
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

/* Y[rows, out] = X[rows, in] W[out, in]^T + beta Y (row-major; BLAS is column-major: Y^T = W^T^T X^T) */
static void linear(const float *X, int rows, int in, const float *Wt, int out, float beta, float *Y) {
    const float one = 1.0f;
    SGEMM_("T", "N", &out, &rows, &in, &one, Wt, &in, X, &in, &beta, Y, &out);
}

enum { L_LN1, L_QKV_W, L_QKV_B, L_O_W, L_O_B, L_LN2, L_GU_W, L_DOWN_W, L_N };

/* A layer's q/k/v of rows x [rows, hid] (Lp: its L_N weight pointers): qkv = RMSNorm(x) W_qkv^T + b. */
static void qkv_projection(const int64_t *Lp, const float *x, int rows, int hid, int qkv_n, float eps, float *xn,
                           float *qkv) {
    const float *qkv_b = (const float *)Lp[L_QKV_B];
    rms_norm(x, (const float *)Lp[L_LN1], xn, rows, hid, eps);
    for (int r = 0; r < rows; r++) {
        float *q = qkv + (int64_t)r * qkv_n;
        if (qkv_b) memcpy(q, qkv_b, sizeof(float) * qkv_n);
        else memset(q, 0, sizeof(float) * qkv_n);
    }
    linear(xn, rows, hid, (const float *)Lp[L_QKV_W], qkv_n, 1.0f, qkv);
}

/* The rest of a layer after attention's output att [rows, hd]: x += att W_o^T + b_o, then the MLP,
   x += (SiLU(gate) up) W_down^T with gate, up = RMSNorm(x) W_gu^T. */
static void after_attention(const int64_t *Lp, const float *att, int rows, int hid, int hd, int inter, float eps,
                            float *x, float *xn, float *gu, float *act) {
    const float *o_b = (const float *)Lp[L_O_B];
    linear(att, rows, hd, (const float *)Lp[L_O_W], hid, 1.0f, x);
    if (o_b)
        for (int r = 0; r < rows; r++)
            for (int i = 0; i < hid; i++) x[(int64_t)r * hid + i] += o_b[i];
    rms_norm(x, (const float *)Lp[L_LN2], xn, rows, hid, eps);
    linear(xn, rows, hid, (const float *)Lp[L_GU_W], 2 * inter, 0.0f, gu);
    silu_mul(gu, act, rows, inter);
    linear(act, rows, inter, (const float *)Lp[L_DOWN_W], hid, 1.0f, x);
}

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
        qkv_projection(Lp, x, rows, hid, qkv_n, eps, xn, qkv);
        attention(qkv, cs, sn, (float *)C[0], (float *)C[1], cap, T, step, (const float *)C[2],
                  (const float *)C[3], pidx, plen, P, W, rows, h, kvh, D, scale, att, scratch, per_prompt);
        after_attention(Lp, att, rows, hid, h * D, inter, eps, x, xn, gu, act);
    }
    rms_norm(x, norm, xn, rows, hid, eps);
    linear(xn, rows, hid, lm_head, vocab, 0.0f, logits);
}

/* ---- the prefill: a chunk of whole prompts through the model, their keys and values kept ----
   tokens: the chunk's prompts one after another, prompt p at tokens[starts[p] .. starts[p + 1]); its token
   i sits at position i. Per layer the rotated keys and the values of every prompt token go to
   kv[layer]: [keys, values], each [kvh, prompts, W, D], at prompt p0 + p (positions from a prompt's length
   on are left as they are); each prompt's last token's logits to logits [P, vocab]. Causal attention
   within each prompt: S = Q K^T over all of its keys (the `scores` product), the later keys masked. The
   arithmetic of decode_step, a prompt at a time instead of a token. work: prefill_work floats. */
static void prefill_attention(const float *qkv, const float *cos_, const float *sin_, const int64_t *starts,
                              int P, int p0, int Ptot, int W, float *const *keys, float *const *values,
                              int h, int kvh, float scale, float *out, float *scratch, int lmax) {
    int g = h / kvh, stride = (h + 2 * kvh) * D, l16max = (lmax + 15) & ~15, lds = l16max + 16;
    float *Q = scratch, *O = Q + (int64_t)lmax * g * D, *INV = O + (int64_t)lmax * g * D,
          *KT = INV + (int64_t)lmax * g, *S = KT + (int64_t)D * l16max;
    for (int p = 0; p < P; p++) {
        int64_t s0 = starts[p];
        int L = (int)(starts[p + 1] - s0), L16 = (L + 15) & ~15, nq = L * g;
        for (int j = 0; j < kvh; j++) {
            float *K = keys[0] + (((int64_t)j * Ptot + p0 + p) * W) * D;
            float *V = values[0] + (((int64_t)j * Ptot + p0 + p) * W) * D;
            for (int i = 0; i < L; i++) {
                const float *row = qkv + (s0 + i) * stride;
                const float *c = cos_ + (s0 + i) * D, *sn = sin_ + (s0 + i) * D;
                rope(row + (h + j) * D, c, sn, D, 1.0f, K + (int64_t)i * D);
                memcpy(V + (int64_t)i * D, row + (h + kvh + j) * D, sizeof(float) * D);
                for (int gi = 0; gi < g; gi++)
                    rope(row + (j * g + gi) * D, c, sn, D, scale, Q + ((int64_t)i * g + gi) * D);
            }
            for (int d = 0; d < D; d++) {  /* K transposed, L16 wide, the padding 0 */
                for (int w = 0; w < L; w++) KT[(int64_t)d * L16 + w] = K[(int64_t)w * D + d];
                for (int w = L; w < L16; w++) KT[(int64_t)d * L16 + w] = 0.0f;
            }
            scores(Q, nq, KT, L16, L, S, lds);
            for (int q = 0; q < nq; q++) {  /* query at position q / g sees keys 0 .. q / g */
                int n = q / g + 1, nv = (n + VW - 1) / VW * VW;
                float *srow = S + (int64_t)q * lds;
                INV[q] = softmax_row(srow, n, nv);
                for (int w = nv; w < L16; w++) srow[w] = 0.0f;  /* later keys: weight 0 in the mix */
            }
            memset(O, 0, (size_t)nq * D * 4);
            mix(S, nq, lds, L, V, O);
            for (int q = 0; q < nq; q++) {
                int i = q / g, gi = q % g;
                float *o = out + (s0 + i) * h * D + (j * g + gi) * D;
                for (int d = 0; d < D; d++) o[d] = O[(int64_t)q * D + d] * INV[q];
            }
        }
    }
}

void prefill(const int64_t *model, float eps, float scale, const int64_t *tokens, const int64_t *starts, int P,
             int p0, int Ptot, int W, const int64_t *kv, const float *rope_tab, float *logits, float *work) {
    int layers = (int)model[0], hid = (int)model[1], inter = (int)model[2], vocab = (int)model[3];
    int h = (int)model[4], kvh = (int)model[5];
    const float *embed = (const float *)model[6], *norm = (const float *)model[7],
                *lm_head = (const float *)model[8];
    int qkv_n = (h + 2 * kvh) * D, N = (int)starts[P], lmax = 0;
    for (int p = 0; p < P; p++) lmax = (int)(starts[p + 1] - starts[p]) > lmax ? (int)(starts[p + 1] - starts[p]) : lmax;
    float *x = work, *xn = x + (int64_t)N * hid, *qkv = xn + (int64_t)N * hid, *att = qkv + (int64_t)N * qkv_n,
          *gu = att + (int64_t)N * h * D, *act = gu + (int64_t)N * 2 * inter, *cs = act + (int64_t)N * inter,
          *sn = cs + (int64_t)N * D, *scratch = sn + (int64_t)N * D;
    for (int p = 0; p < P; p++)
        for (int64_t t = starts[p]; t < starts[p + 1]; t++) {
            int64_t pos = t - starts[p];
            memcpy(x + t * hid, embed + tokens[t] * hid, sizeof(float) * hid);
            memcpy(cs + t * D, rope_tab + pos * 2 * D, sizeof(float) * D);
            memcpy(sn + t * D, rope_tab + pos * 2 * D + D, sizeof(float) * D);
        }
    for (int li = 0; li < layers; li++) {
        const int64_t *Lp = model + 9 + li * L_N;
        float *keys[1] = {(float *)kv[li * 2]}, *values[1] = {(float *)kv[li * 2 + 1]};
        qkv_projection(Lp, x, N, hid, qkv_n, eps, xn, qkv);
        prefill_attention(qkv, cs, sn, starts, P, p0, Ptot, W, keys, values, h, kvh, scale, att, scratch, lmax);
        after_attention(Lp, att, N, hid, h * D, inter, eps, x, xn, gu, act);
    }
    for (int p = 0; p < P; p++)  /* each prompt's last token */
        rms_norm(x + (starts[p + 1] - 1) * hid, norm, xn + (int64_t)p * hid, 1, hid, eps);
    linear(xn, P, hid, lm_head, vocab, 0.0f, logits);
}

int64_t prefill_work(int64_t tokens, int64_t lmax, int hid, int inter, int h, int kvh) {
    int64_t g = h / kvh, l16 = (lmax + 15) & ~15;
    int64_t per_token = 2 * hid + (h + 2 * kvh) * D + h * D + 3 * inter + 2 * D;
    return tokens * per_token + lmax * g * D * 2 + lmax * g + D * l16 + lmax * g * (l16 + 16) + 64;
}

int64_t decode_work(int rows, int hid, int inter, int h, int kvh, int per_prompt, int W, int T) {
    int64_t per_row = 2 * hid + (h + 2 * kvh) * D + h * D + 3 * inter + 2 * D;
    return rows * per_row + attention_scratch(per_prompt, h / kvh, D, W, T);
}

/* ---- one step's draws, and the records of the rows still running ----
   maxk.generate.decode.draw_tokens for top_p = 1, then the bookkeeping of QwenDecoder._draw, for each
   running row r of logits [rows, vocab]: y = logits / temperature, m = max y, e = exp(y - m) (the
   polynomial exp), S = sum e; log-prob y - m - log S, entropy log S - sum e (y - m) / S; the token is the
   first whose cumulative e (in double, summed a block of VW at a time, then within its block) exceeds
   u * (the sum of the blocks), or the first most likely one where rounding puts none above it; u is row
   r's uniform of this step, uniforms[prompt_of[r], step, orig[r] - prompt_of[r] n] (uniforms [prompts,
   steps, n]). The same distribution as torch's operations up to float rounding, so the same tokens but
   where a uniform falls within that rounding of a boundary. A row still alive records its token at
   out_tokens[orig[r], step] and adds its log-prob and entropy to its sums (in double); a stop token ends
   it (out_len, stopped, alive). scratch: draw_scratch(vocab) floats. Returns how many rows are still
   alive. */
static inline __attribute__((always_inline)) float hsum_tree(vf v) {  /* pairwise: not one long chain */
    float a[VW];
    memcpy(a, &v, sizeof v);
    for (int w = VW / 2; w >= 1; w /= 2)
        for (int i = 0; i < w; i++) a[i] += a[i + w];
    return a[0];
}

static int64_t draw_row(const float *x, int64_t vocab, float inv_t, double u, float *e, double *block,
                        float *logp_token, float *entropy) {
    int64_t full = vocab / VW * VW, nblocks = (vocab + VW - 1) / VW;
    const vf zero = {0};
    /* y = x / temperature, rounded and stored first: a fused x * inv_t - m would leave the largest y - m
       a rounding error instead of 0, which for huge logits runs past exp's range */
    vf mv = zero - INFINITY;
    for (int64_t v = 0; v < full; v += VW) {
        vf yv = ld(x + v) * inv_t;
        st(e + v, yv);
        mv = vsel(yv > mv, yv, mv);
    }
    float m = -INFINITY;
    for (int i = 0; i < VW; i++) m = mv[i] > m ? mv[i] : m;
    for (int64_t v = full; v < nblocks * VW; v++) {
        e[v] = v < vocab ? x[v] * inv_t : -INFINITY;  /* past the vocabulary: exp gives 0 */
        m = e[v] > m ? e[v] : m;
    }
    /* e = exp(y - m); S = sum e; sum e (y - m) gives the entropy: H = log S - sum e (y - m) / S */
    vf sv = zero, hv = zero;
    double total = 0.0;
    for (int64_t b = 0; b < nblocks; b++) {
        vf yv = ld(e + b * VW) - m;
        vf ev = vexp(yv);
        st(e + b * VW, ev);
        sv += ev;
        hv += vsel(ev > 0.0f, ev * yv, zero);  /* e = 0 adds nothing (y may be -inf) */
        block[b] = hsum_tree(ev);
        total += block[b];
    }
    float sum = hsum(sv), log_sum = logf(sum);
    *entropy = log_sum - hsum(hv) / sum;
    double target = u * total, acc = 0.0;
    int64_t token = -1;
    for (int64_t b = 0; b < nblocks && token < 0; b++) {
        if (acc + block[b] <= target) {
            acc += block[b];
            continue;
        }
        for (int64_t v = b * VW; v < b * VW + VW && v < vocab; v++) {
            acc += (double)e[v];
            if (acc > target && e[v] > 0.0f) {
                token = v;
                break;
            }
        }
    }
    if (token < 0) {  /* rounding put the target on or past the total: as draw_tokens, the last token, or
                         where its p is 0 the first most likely one */
        token = vocab - 1;
        if (!(e[token] > 0.0f)) {
            token = 0;
            for (int64_t v = 1; v < vocab; v++)
                if (e[v] > e[token]) token = v;
        }
    }
    volatile float y_token = x[token] * inv_t;  /* rounded as above */
    *logp_token = (y_token - m) - log_sum;
    return token;
}

int64_t draw_step(const float *logits, int64_t rows, int64_t vocab, float temperature, const double *uniforms,
                  int64_t steps, int64_t n, int64_t step, const int64_t *orig, const int64_t *prompt_of,
                  uint8_t *alive, int64_t *token, int64_t *out_tokens, int64_t max_new, double *sum_logp,
                  double *sum_ent, int64_t *out_len, uint8_t *stopped, const int64_t *stop, int64_t nstop,
                  float *scratch) {
    int64_t width = (vocab + VW - 1) / VW * VW, live = 0;
    float *e = scratch, inv_t = 1.0f / temperature;
    double *block = (double *)(e + width);  /* width is a multiple of VW: 8-byte aligned */
    for (int64_t r = 0; r < rows; r++) {
        int64_t pr = prompt_of[r];
        double u = uniforms[(pr * steps + step) * n + (orig[r] - pr * n)];
        float logp, ent;
        int64_t tok = draw_row(logits + r * vocab, vocab, inv_t, u, e, block, &logp, &ent);
        token[r] = tok;
        if (!alive[r]) continue;
        int64_t o = orig[r];
        out_tokens[o * max_new + step] = tok;
        sum_logp[o] += (double)logp;
        sum_ent[o] += (double)ent;
        int done = 0;
        for (int64_t s = 0; s < nstop; s++) done |= stop[s] == tok;
        if (done) {
            out_len[o] = step + 1;
            stopped[o] = 1;
            alive[r] = 0;
        } else
            live++;
    }
    return live;
}

int64_t draw_scratch(int64_t vocab) {  /* floats */
    int64_t width = (vocab + VW - 1) / VW * VW;
    return width + 2 * (width / VW + 1);
}

/* ---- compaction in place ----
   The rows still running, idx (increasing, nidx of them), move down to rows 0 .. nidx - 1 of every layer's
   own caches (caches: [layers, 4] pointers as decode_step reads them; own keys [kvh, cap, T / VW, D, VW],
   own values [kvh, cap, T, D]): only what the first `used` steps wrote (whole key tiles). Row i takes row
   idx[i] >= i, in increasing i, so no row is overwritten before it is read. */
void compact_rows(const int64_t *caches, int64_t layers, int64_t kvh, int64_t cap, int64_t T,
                  const int64_t *idx, int64_t nidx, int64_t used) {
    int64_t key_floats = (used + VW - 1) / VW * VW * D, value_floats = used * D;
    for (int64_t li = 0; li < layers; li++) {
        float *keys = (float *)caches[li * 4], *values = (float *)caches[li * 4 + 1];
        for (int64_t j = 0; j < kvh; j++)
            for (int64_t i = 0; i < nidx; i++) {
                int64_t from = idx[i];
                if (from == i) continue;
                memcpy(keys + (j * cap + i) * T * D, keys + (j * cap + from) * T * D, sizeof(float) * key_floats);
                memcpy(values + (j * cap + i) * T * D, values + (j * cap + from) * T * D, sizeof(float) * value_floats);
            }
    }
}
