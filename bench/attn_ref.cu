/* attn_ref.cu — the reference for bench/attn_tune.cu: the attention kernels
 * as they were before issue 15's tuning (git show ATTN_REF:kernels/cuda/
 * attention.cu, written by the Makefile's attn-tune rule into
 * build/bench/attn_ref_src.cu), compiled in this translation unit of its
 * own with its three entry points renamed, so candidates are checked
 * against the code that was tested against the CPU twin. */
#define ms_cuda_attention_fwd attn_ref_fwd
#define ms_cuda_attention_bwd attn_ref_bwd
#define ms_cuda_attention_bwd_scratch attn_ref_bwd_scratch
#include "kernels/cuda/attention_cuda.h"
#include ATTN_REF_SRC
