/* kernel_family.c — kernel name → step family by name patterns. Contract:
 * kernel_family.h. Substring patterns are case-insensitive; the few short
 * names of memsplit's own kernels that are also common words ("scale_k",
 * "cast_k") match only as whole identifiers, so "upscale_kernel" stays
 * unclassified. */
#include "profiler/kernel_family.h"

#include <ctype.h>
#include <stddef.h>
#include <string.h>

/* 1 if any pattern occurs in name (case-insensitive); the list ends at NULL. */
static int any_of(const char *name, const char *const *pats)
{
    for (; *pats; pats++)
        if (strcasestr(name, *pats)) return 1;
    return 0;
}

/* 1 if id occurs as a whole identifier: the character before is not a
 * letter or '_' (a digit is allowed: mangled names put the identifier's
 * length there, "_Z7scale_kI..."), and the one after is not a lowercase
 * letter, digit or '_' (mangled names go on with an uppercase code: 'I',
 * 'P', 'E'; demangled ones with '<' or '('). */
static int has_ident(const char *name, const char *id)
{
    size_t n = strlen(id);
    for (const char *p = strstr(name, id); p; p = strstr(p + 1, id)) {
        int before_ok = p == name || !(isalpha((unsigned char)p[-1]) || p[-1] == '_');
        unsigned char after = (unsigned char)p[n];
        int after_ok = !(islower(after) || isdigit(after) || after == '_');
        if (before_ok && after_ok) return 1;
    }
    return 0;
}

static const char *const ATTN[] = {"attn", "attention", "flash_", "fmha", "sdpa", NULL};
/* among attention kernels: what marks the backward pass (flash's
 * "dot_do_o" and "convert_dq" prepare/finish dQ; memsplit's attn_dq_store) */
static const char *const ATTN_BWD[] = {"bwd", "backward", "bprop", "cutlassb", "dq_", "dkv", "dot_do_o", NULL};
static const char *const MATMUL[] = {"gemm", "gemv", "nvjet", "xmma", "splitkreduce", "cutlass", "triton_tem",
                                     "cublas", "matmul", NULL};
static const char *const XENT[] = {"softmax", "xent", "nll_loss", "cross_entropy", "crossentropy", NULL};
static const char *const NORM[] = {"layernorm", "layer_norm", "batchnorm", "batch_norm", "gammabeta",
                                   "rowwisemoments", NULL};
static const char *const GELU_BIAS[] = {"gelu", "bias_grad", "mm_epilogue", NULL};
static const char *const OPTIM[] = {"adam", "grad_stats", "lpnorm", "multi_tensor_apply", "clip_grad", NULL};
static const char *const COPY[] = {"memcpy", "memset", "copy", "fillfunctor", "fill_kernel", NULL};

ms_kernel_family ms_kernel_classify(const char *name)
{
    if (!name || !*name) return MS_KF_OTHER;
    if (any_of(name, ATTN)) return any_of(name, ATTN_BWD) ? MS_KF_ATTN_BWD : MS_KF_ATTN_FWD;
    if (any_of(name, MATMUL)) return MS_KF_MATMUL;
    if (any_of(name, XENT)) return MS_KF_XENT;
    if (any_of(name, NORM)) return MS_KF_NORM;
    if (any_of(name, GELU_BIAS)) return MS_KF_GELU_BIAS;
    if (any_of(name, OPTIM) || has_ident(name, "scale_k")) return MS_KF_OPTIM;
    if (any_of(name, COPY) || has_ident(name, "cast_k")) return MS_KF_COPY;
    return MS_KF_OTHER;
}

static const char *const NAMES[MS_KF_N] = {
    "matmul", "attn_fwd", "attn_bwd", "layernorm", "gelu_bias", "softmax_xent", "adamw", "copy_memset", "other",
};
static const char *const LABELS[MS_KF_N] = {
    "matmul (cuBLASLt/GEMM)",
    "attention forward",
    "attention backward",
    "layernorm",
    "gelu / bias epilogues",
    "softmax / cross-entropy",
    "adamw + grad norm/clip",
    "copies / casts / memsets",
    "other (embedding, residual, ...)",
};

const char *ms_kernel_family_name(ms_kernel_family f)
{
    return (unsigned)f < MS_KF_N ? NAMES[f] : "other";
}

const char *ms_kernel_family_label(ms_kernel_family f)
{
    return (unsigned)f < MS_KF_N ? LABELS[f] : LABELS[MS_KF_OTHER];
}
