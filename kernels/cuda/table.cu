/* table.cu — ms_ops_cuda, the CUDA instance of the op table (ops.h).
 * ops.h declares it (without extern "C"; a namespace-scope variable's name is
 * not mangled, so C code links to it), which also gives this const
 * definition external linkage. */
#include "kernels/cuda/cuda_kernels.h"

const ms_ops ms_ops_cuda = {
    /* .name = */ "cuda",
    /* .sync = */ ms_cuda_sync,
    /* .embedding_fwd = */ ms_cuda_embedding_fwd,
    /* .embedding_bwd = */ ms_cuda_embedding_bwd,
    /* .layernorm_fwd = */ ms_cuda_layernorm_fwd,
    /* .layernorm_bwd = */ ms_cuda_layernorm_bwd,
    /* .batchnorm_fwd = */ ms_cuda_batchnorm_fwd,
    /* .batchnorm_bwd = */ ms_cuda_batchnorm_bwd,
    /* .matmul = */ ms_cuda_matmul,
    /* .bias_grad = */ ms_cuda_bias_grad,
    /* .attention_fwd = */ ms_cuda_attention_fwd,
    /* .attention_bwd_scratch = */ ms_cuda_attention_bwd_scratch,
    /* .attention_bwd = */ ms_cuda_attention_bwd,
    /* .gelu_fwd = */ ms_cuda_gelu_fwd,
    /* .gelu_bwd = */ ms_cuda_gelu_bwd,
    /* .residual_fwd = */ ms_cuda_residual_fwd,
    /* .softmax_xent = */ ms_cuda_softmax_xent,
    /* .adamw = */ ms_cuda_adamw,
    /* .clip_scale = */ ms_cuda_clip_scale,
    /* .cast = */ ms_cuda_cast,
    /* .grad_stats = */ ms_cuda_grad_stats,
    /* .scale = */ ms_cuda_scale,
};
