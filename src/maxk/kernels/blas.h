/* The BLAS of maxk's C kernels: torch's own sgemm_ (Fortran interface, LP64), whose address
   maxk.ckernels hands to each library's set_sgemm before any call. */
#ifndef MAXK_BLAS_H
#define MAXK_BLAS_H
typedef void (*sgemm_fn)(const char *, const char *, const int *, const int *, const int *, const float *,
                         const float *, const int *, const float *, const int *, const float *, float *,
                         const int *);
static sgemm_fn SGEMM_ = 0;
void set_sgemm(void *f) { SGEMM_ = (sgemm_fn)f; }

/* Row-major C[M, N] = alpha op(A) op(B) + beta C, op(A) of M x K (A^T where ta), op(B) of K x N (B^T where
   tb), each with its row stride. BLAS is column-major: C^T = op(B)^T op(A)^T. */
static inline void mm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                      int ldb, float beta, float *C, int ldc) {
    SGEMM_(tb ? "T" : "N", ta ? "T" : "N", &N, &M, &K, &alpha, B, &ldb, A, &lda, &beta, C, &ldc);
}
#endif
