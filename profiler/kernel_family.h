/* kernel_family.h — which part of a training step a GPU kernel belongs to,
 * from its name alone: the families the benchmark's "where the step goes"
 * table sums (bench/README.md). Names come from CUPTI kernel records
 * (mangled, e.g. "_Z11attn_fwd_tcI13__nv_bfloat16EvPT_PfPKS1_iiif"), from
 * torch.profiler traces (demangled, e.g. "void at::native::(anonymous
 * namespace)::vectorized_layer_norm_kernel<float, float>(...)"), or are the
 * labels kernel_trace.h gives copies and memsets ("[memcpy HtoD]").
 *
 * Contract:
 *  - ms_kernel_classify never fails: NULL, "" and unknown names are
 *    MS_KF_OTHER. Matching is case-insensitive and takes the first family
 *    whose patterns match, in this order: attention (backward before
 *    forward), matmul, softmax/cross-entropy, norm, GELU/bias, optimizer,
 *    copy/memset. The order settles names that would fit two families
 *    (Triton's fused kernels, flash attention's "cutlass" kernels).
 *  - The patterns cover memsplit's own kernels (kernels/cuda/), cuBLAS and
 *    cuBLASLt GEMMs (sm90_xmma, nvjet, cutlass, split-K reduce), PyTorch's
 *    eager kernels and torch.compile's Triton kernels; the unit test
 *    (tests/unit/test_kernel_family.c) lists the names each family is
 *    meant to catch.
 *  - ms_kernel_family_name gives a stable identifier (JSON keys) and
 *    ms_kernel_family_label a short description for tables. */
#ifndef MS_KERNEL_FAMILY_H
#define MS_KERNEL_FAMILY_H

typedef enum ms_kernel_family {
    MS_KF_MATMUL,   /* GEMMs: cuBLAS/cuBLASLt, CUTLASS, Triton templates */
    MS_KF_ATTN_FWD, /* attention forward (memsplit's, flash, memory-efficient, cuDNN) */
    MS_KF_ATTN_BWD, /* attention backward, with its prep/dq passes */
    MS_KF_NORM,     /* layernorm (and batchnorm) forward and backward */
    MS_KF_GELU_BIAS,/* GELU and its gradient, bias gradients, unfused matmul epilogues */
    MS_KF_XENT,     /* softmax / cross-entropy / NLL loss */
    MS_KF_OPTIM,    /* AdamW, gradient norm and clipping */
    MS_KF_COPY,     /* memcpy, memset, casts and copy kernels, fills */
    MS_KF_OTHER,    /* embedding, residual adds, reductions, anything else */
    MS_KF_N
} ms_kernel_family;

ms_kernel_family ms_kernel_classify(const char *name);
const char *ms_kernel_family_name(ms_kernel_family f);
const char *ms_kernel_family_label(ms_kernel_family f);

#endif
