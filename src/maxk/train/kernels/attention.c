/* Attention of the policy update, forward and backward, float32, on a CPU: what torch's scaled dot-product
   attention computes for transformers' Qwen2 layers (grouped-query heads, a boolean mask or a causal one),
   with the probabilities kept for the backward instead of recomputed.

   Per batch row b and key/value head g, the G query heads of the group are one matrix of G x W rows:
       S = scale Q K^T,  P = softmax(S) over the keys the mask lets through (0 elsewhere; a row with none
       is all 0, as torch's kernel gives),  O = P V;
   and backward, from dO:
       dP = dO V^T,  dS = P (dP - rowsum(dO O)),  dQ = scale dS K,  dK = scale dS^T Q,  dV = P^T dO.
   The matrix products go to the BLAS torch links (sgemm_, handed over by maxk.train.native_attention);
   the softmax and the masks are here. Layouts (row-major, contiguous): q [B, H, W, D]; k, v [B, KVH, S, D];
   mask [B, W, S] bytes (1: attend) or none, then query i sees keys j <= i + offset; p [B, H, W, Sp]
   (Sp: S rounded up to 16, the padding 0);
   o and do [B, W, H, D] (transformers' layout after attention); dq like q, dk and dv like k; the
   backward's scratch dS [G, W, Sp] and delta [G, W] (G = H / KVH). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "blas.h"
#include "vec.h"

/* A row of n scores, padded to Sp (a multiple of VW), into probabilities in place: the keys past n and
   those where ok[j] is 0 (ok: n bytes, or none, then the first `upto` keys) get 0, the rest their softmax;
   a row with no key is all 0. */
static void softmax_masked(float *row, const uint8_t *ok, int upto, int n, int Sp) {
    const int S = Sp;
    const vf ninf = (vf){0} - INFINITY;
    vf mv = ninf;
    for (int j = 0; j < S; j += VW) {
        vi keep;
        if (ok) {
            for (int i = 0; i < VW; i++) keep[i] = j + i < n && ok[j + i] ? -1 : 0;
        } else {
            for (int i = 0; i < VW; i++) keep[i] = j + i < n && j + i < upto ? -1 : 0;
        }
        vf x = vsel(keep, ld(row + j), ninf);
        st(row + j, x);
        mv = vsel(x > mv, x, mv);
    }
    float m = mv[0];
    for (int i = 1; i < VW; i++) m = mv[i] > m ? mv[i] : m;
    if (m == -INFINITY) {
        memset(row, 0, sizeof(float) * S);
        return;
    }
    vf sv = {0};
    for (int j = 0; j < S; j += VW) {
        vf e = vexp(ld(row + j) - m);
        sv += e;
        st(row + j, e);
    }
    vf inv = (vf){0} + 1.0f / hsum(sv);
    for (int j = 0; j < S; j += VW) st(row + j, ld(row + j) * inv);
}

void attention_forward(const float *q, const float *k, const float *v, const uint8_t *mask, int offset, int B,
                       int H, int KVH, int W, int S, int Sp, int D, float scale, float *p, float *o) {
    int G = H / KVH, HD = H * D;
    for (int64_t b = 0; b < B; b++) {
        for (int g = 0; g < KVH; g++) {
            const float *Q = q + ((b * H + (int64_t)g * G) * W) * D;
            const float *K = k + ((b * KVH + g) * (int64_t)S) * D, *V = v + ((b * KVH + g) * (int64_t)S) * D;
            float *P = p + ((b * H + (int64_t)g * G) * W) * Sp;
            mm(0, 1, G * W, S, D, scale, Q, D, K, D, 0.0f, P, Sp);
            for (int r = 0; r < G * W; r++) {
                int w = r % W;
                const uint8_t *ok = mask ? mask + ((int64_t)b * W + w) * S : 0;
                softmax_masked(P + (int64_t)r * Sp, ok, w + offset + 1, S, Sp);
            }
            for (int h = 0; h < G; h++)
                mm(0, 0, W, D, S, 1.0f, P + (int64_t)h * W * Sp, Sp, V, D, 0.0f, o + b * W * HD + (g * G + h) * D,
                   HD);
        }
    }
}

void attention_backward(const float *q, const float *k, const float *v, const float *p, const float *o,
                        const float *dout, int B, int H, int KVH, int W, int S, int Sp, int D, float scale,
                        float *dS, float *delta, float *dq, float *dk, float *dv) {
    int G = H / KVH, HD = H * D;
    for (int64_t b = 0; b < B; b++) {
        for (int g = 0; g < KVH; g++) {
            const float *Q = q + ((b * H + (int64_t)g * G) * W) * D;
            const float *K = k + ((b * KVH + g) * (int64_t)S) * D, *V = v + ((b * KVH + g) * (int64_t)S) * D;
            const float *P = p + ((b * H + (int64_t)g * G) * W) * Sp;
            float *dK = dk + ((b * KVH + g) * (int64_t)S) * D, *dV = dv + ((b * KVH + g) * (int64_t)S) * D;
            for (int h = 0; h < G; h++) {
                const float *dO = dout + b * W * HD + (g * G + h) * D, *O = o + b * W * HD + (g * G + h) * D;
                mm(0, 1, W, S, D, 1.0f, dO, HD, V, D, 0.0f, dS + (int64_t)h * W * Sp, Sp);  /* dP */
                mm(1, 0, S, D, W, 1.0f, P + (int64_t)h * W * Sp, Sp, dO, HD, h ? 1.0f : 0.0f, dV, D);
                for (int w = 0; w < W; w++) {
                    float s = 0.0f;
                    for (int d = 0; d < D; d++) s += dO[(int64_t)w * HD + d] * O[(int64_t)w * HD + d];
                    delta[h * W + w] = s;
                }
            }
            for (int64_t r = 0; r < (int64_t)G * W; r++) {  /* dS = P (dP - delta); 0 past S, where P is */
                float *row = dS + r * Sp;
                const float *prow = P + r * Sp;
                vf dl = (vf){0} + delta[r];
                for (int j = 0; j < Sp; j += VW) st(row + j, ld(prow + j) * (ld(row + j) - dl));
            }
            mm(0, 0, G * W, D, S, scale, dS, Sp, K, D, 0.0f, dq + ((b * H + (int64_t)g * G) * W) * D, D);
            mm(1, 0, S, D, G * W, scale, dS, Sp, Q, D, 0.0f, dK, D);
        }
    }
}

