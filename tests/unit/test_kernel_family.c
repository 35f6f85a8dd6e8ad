/* test_kernel_family.c — the kernel name → family classifier
 * (profiler/kernel_family.h) on names as CUPTI and torch.profiler report
 * them: memsplit's own kernels (mangled), cuBLAS/cuBLASLt GEMMs, PyTorch
 * eager kernels, flash / memory-efficient / cuDNN attention, Triton kernels
 * of torch.compile, copy and memset labels; and the summary and event file
 * of profiler/kernel_times.h: busy time as a union, the gap, clipping to a
 * window, per-family sums and a file round trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "profiler/kernel_family.h"
#include "profiler/kernel_times.h"

typedef struct named {
    const char *name;
    ms_kernel_family want;
} named;

static const named NAMES[] = {
    /* memsplit's kernels, as CUPTI names them (nvcc's mangling) */
    { "_Z11attn_fwd_tcI13__nv_bfloat16EvPT_PfPKS1_iiif", MS_KF_ATTN_FWD },
    { "_Z12attn_fwd_f32PfS_PKfiiif", MS_KF_ATTN_FWD },
    { "_Z15attn_fwd_simpleI13__nv_bfloat16EvPT_PfPKS1_iiiif", MS_KF_ATTN_FWD },
    { "_Z11attn_bwd_tcI13__nv_bfloat16EvPT_PfPKS1_S4_S4_PKfiiif", MS_KF_ATTN_BWD },
    { "_Z15attn_bwd_prep16I13__nv_bfloat16EvPfS1_PKT_S4_iiix", MS_KF_ATTN_BWD },
    { "_Z13attn_bwd_prepIfEvPfPKT_S3_iiix", MS_KF_ATTN_BWD },
    { "_Z13attn_dq_storeI13__nv_bfloat16EvPT_PKfmif", MS_KF_ATTN_BWD },
    { "_Z16attn_bwd_dkv_f32PfPKfS1_S1_S1_iiif", MS_KF_ATTN_BWD },
    { "_Z15layernorm_fwd_kI13__nv_bfloat16EvPT_PfS3_PKS1_PKfS7_ii", MS_KF_NORM },
    { "_Z15layernorm_bwd_kI13__nv_bfloat16EvPT_PKS1_PfS5_S4_S4_PKfS7_S7_ii", MS_KF_NORM },
    { "_Z15batchnorm_fwd_kIfEvPT_PfS2_S2_S2_fPKS0_PKfS6_iii", MS_KF_NORM },
    { "_Z14softmax_xent_kI13__nv_bfloat16EvPfPT_PKiiif", MS_KF_XENT },
    { "_Z10gelu_fwd_kI13__nv_bfloat16EvPT_PKS1_m", MS_KF_GELU_BIAS },
    { "_Z10gelu_bwd_kI13__nv_bfloat16EvPT_PKS1_S4_m", MS_KF_GELU_BIAS },
    { "_Z11bias_grad_kI13__nv_bfloat16EvPfPKT_ii", MS_KF_GELU_BIAS },
    { "_Z13mm_epilogue_kI13__nv_bfloat16EvPT_PKS1_PKfS4_iii", MS_KF_GELU_BIAS },
    { "_Z7adamw_kPfS_S_PKfmffffffff", MS_KF_OPTIM },
    { "_Z12grad_stats_kILi4EEvPKfmPfPi", MS_KF_OPTIM },
    { "_Z7scale_kILi4EEvPfmf", MS_KF_OPTIM },
    { "_Z6cast_kI13__nv_bfloat16fEvPT_PKT0_m", MS_KF_COPY },
    { "_Z15embedding_fwd_kI13__nv_bfloat16EvPT_PKiPKfS5_iii", MS_KF_OTHER },
    { "_Z10residual_kI13__nv_bfloat16EvPT_PKS1_S4_m", MS_KF_OTHER },
    /* cuBLAS / cuBLASLt */
    { "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
      MS_KF_MATMUL },
    { "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x16_stage4_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
      MS_KF_MATMUL },
    { "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNT", MS_KF_MATMUL }, /* "bias" in a GEMM stays a GEMM */
    { "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_gelu_aux_NNT", MS_KF_MATMUL },
    { "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, false, false, false>"
      "(cublasLt::cublasSplitKParams<float>, float const*, __nv_bfloat16 const*, __nv_bfloat16*, float const*, "
      "float const*, __nv_bfloat16 const*, float const*, __nv_bfloat16*, void*, long, float*, int*)",
      MS_KF_MATMUL },
    { "ampere_sgemm_128x64_nn", MS_KF_MATMUL },
    { "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>(cutlass_80_wmma_"
      "tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8::Params)",
      MS_KF_MATMUL },
    { "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false, cublasGemvParamsEx<int, "
      "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, "
      "cublasGemvTensorStridedBatched<float>, float> >(cublasGemvParamsEx<...>, float, float)",
      MS_KF_MATMUL },
    /* PyTorch attention */
    { "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 64, 4, false, false, cutlass::bfloat16_t, "
      "Flash_kernel_traits<64, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>"
      "(pytorch_flash::Flash_fwd_params)",
      MS_KF_ATTN_FWD },
    { "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<64, 128, 128, 8, 2, 4, 2, "
      "false, false, cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 128, 8, cutlass::bfloat16_t> >, true, false, "
      "false, false, false, true, false>(pytorch_flash::Flash_bwd_params)",
      MS_KF_ATTN_BWD },
    { "void pytorch_flash::flash_bwd_dot_do_o_kernel<true, Flash_bwd_kernel_traits<64, 128, 128, 8, 2, 4, 2, false, "
      "false, cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 128, 8, cutlass::bfloat16_t> > >"
      "(pytorch_flash::Flash_bwd_params)",
      MS_KF_ATTN_BWD },
    { "void pytorch_flash::flash_bwd_convert_dq_kernel<Flash_bwd_kernel_traits<64, 128, 128, 8, 2, 4, 2, false, false, "
      "cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 128, 8, cutlass::bfloat16_t> > >(pytorch_flash::Flash_bwd_params, int)",
      MS_KF_ATTN_BWD },
    { "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t, "
      "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
      MS_KF_ATTN_FWD },
    { "fmha_cutlassB_bf16_aligned_64x64_k64_sm80(PyTorchMemEffAttention::AttentionBackwardKernel<cutlass::arch::Sm80, "
      "cutlass::bfloat16_t, true, false, false, 64, 64, 64, false>::Params)",
      MS_KF_ATTN_BWD },
    { "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128_4x1x1_kernel0_0", MS_KF_ATTN_FWD },
    { "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_3_64x64x128_4x1x1_kernel0_0", MS_KF_ATTN_BWD },
    /* PyTorch eager */
    { "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*, "
      "float const*, float const*, float*, float*, float*)",
      MS_KF_NORM },
    { "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<float, float>(float const*, "
      "float const*, float const*, float const*, float const*, float*, int)",
      MS_KF_NORM },
    { "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel_32x32<float, float>(long, long, float const*, "
      "float const*, float const*, float const*, float*, float*)",
      MS_KF_NORM },
    { "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
      "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, "
      "at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::"
      "{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)",
      MS_KF_GELU_BIAS },
    { "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous "
      "namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)",
      MS_KF_XENT },
    { "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*, float*, "
      "float const*, long const*, float const*, bool, long, long, long, long)",
      MS_KF_XENT },
    { "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
      "FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, "
      "(at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool, float const*, float const*>"
      "(at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, ...)",
      MS_KF_OPTIM },
    { "void at::native::lpnorm_cleanup<float, (at::native::NormType)1, float, float>(float const*, "
      "at::native::TensorListAddresses, int)",
      MS_KF_OPTIM },
    { "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"
      "{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>, "
      "TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, "
      "at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, ...)",
      MS_KF_COPY },
    { "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >"
      "(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
      MS_KF_COPY },
    { "void at::native::indexSelectLargeIndex<float, long, unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<float, "
      "unsigned int>, at::cuda::detail::TensorInfo<float const, unsigned int>, at::cuda::detail::TensorInfo<long const, "
      "unsigned int>, int, int, unsigned int, unsigned int, long)",
      MS_KF_OTHER },
    { "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >"
      "(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
      MS_KF_OTHER },
    { "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
      "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
      "unsigned int, float, 4, 4> >(at::native::ReduceOp<...>)",
      MS_KF_OTHER },
    /* torch.compile (Triton) */
    { "triton_per_fused_add_native_layer_norm_0", MS_KF_NORM },
    { "triton_red_fused_native_layer_norm_native_layer_norm_backward_7", MS_KF_NORM },
    { "triton_poi_fused_gelu_2", MS_KF_GELU_BIAS },
    { "triton_per_fused_gelu_gelu_backward_sum_9", MS_KF_GELU_BIAS },
    { "triton_red_fused__log_softmax_nll_loss_forward_5", MS_KF_XENT },
    { "triton_poi_fused__to_copy_1", MS_KF_COPY },
    { "triton_tem_fused_addmm_0", MS_KF_MATMUL },
    { "triton_red_fused_sum_3", MS_KF_OTHER },
    /* copies and memsets: kernel_trace.h's labels and torch.profiler's */
    { "[memcpy HtoD]", MS_KF_COPY },
    { "[memcpy DtoH]", MS_KF_COPY },
    { "[memset]", MS_KF_COPY },
    { "Memcpy HtoD (Pinned -> Device)", MS_KF_COPY },
    { "Memset (Device)", MS_KF_COPY },
    /* short identifiers match whole only */
    { "void at::native::broadcast_kernel<float>(float*)", MS_KF_OTHER },
    { "_Z14upscale_kernelPfS_i", MS_KF_OTHER },
    { "_Z8upcast_kPfPKfm", MS_KF_OTHER },
    { "void scale_k<4>(float*, unsigned long, float)", MS_KF_OPTIM },
    { "", MS_KF_OTHER },
};

static void test_classify_real_names(void **st)
{
    (void)st;
    int bad = 0;
    for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++) {
        ms_kernel_family got = ms_kernel_classify(NAMES[i].name);
        if (got != NAMES[i].want) {
            printf("  %-14s want %-14s: %.100s\n", ms_kernel_family_name(got), ms_kernel_family_name(NAMES[i].want),
                   NAMES[i].name);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
    assert_int_equal(ms_kernel_classify(NULL), MS_KF_OTHER);
}

static void test_family_names(void **st)
{
    (void)st;
    for (int f = 0; f < MS_KF_N; f++) {
        assert_non_null(ms_kernel_family_name(f));
        assert_true(strlen(ms_kernel_family_label(f)) > 0);
        for (int g = 0; g < f; g++) assert_string_not_equal(ms_kernel_family_name(f), ms_kernel_family_name(g));
    }
    assert_string_equal(ms_kernel_family_name(MS_KF_N), "other");
    assert_string_equal(ms_kernel_family_name(MS_KF_MATMUL), "matmul");
}

static double num(const json_t *o, const char *path1, const char *path2, const char *key)
{
    if (path1) o = json_object_get(o, path1);
    if (path2) o = json_object_get(o, path2);
    const json_t *v = json_object_get(o, key);
    assert_non_null(v);
    return json_number_value(v);
}

#define NEAR(a, b) assert_true(fabs((a) - (b)) < 1e-9)

/* Two steps of 10 ms: a GEMM and an overlapping one on another stream
 * (busy counts their union once), an attention kernel, a copy, and a
 * kernel outside the window. */
static void fill(ms_ktimes *k)
{
    const char *gemm = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64";
    assert_int_equal(ms_ktimes_add(k, gemm, 1000000, 4000000), 0);                              /* 3 ms */
    assert_int_equal(ms_ktimes_add(k, gemm, 3000000, 5000000), 0);                              /* 2 ms, 1 overlapped */
    assert_int_equal(ms_ktimes_add(k, "_Z11attn_fwd_tcIfEvv", 6000000, 7000000), 0);            /* 1 ms */
    assert_int_equal(ms_ktimes_add(k, "[memcpy HtoD]", 12000000, 12500000), 0);                /* 0.5 ms */
    assert_int_equal(ms_ktimes_add(k, gemm, 13000000, 16000000), 0);                            /* 3 ms */
    assert_int_equal(ms_ktimes_add(k, "_Z8late_kerv", 25000000, 26000000), 0);                  /* outside */
    assert_int_equal(ms_ktimes_add(k, "_Z8bad_kerv", 9, 9), 0);                                  /* no length */
}

static void test_summary_window(void **st)
{
    (void)st;
    ms_ktimes k;
    ms_ktimes_init(&k);
    fill(&k);
    assert_int_equal(k.n, 6);
    assert_int_equal(k.n_names, 4);
    assert_int_equal((int)k.skipped, 1);
    json_t *s = ms_ktimes_summary(&k, 2, 0, 20000000, 0, 3);
    assert_non_null(s);
    NEAR(num(s, NULL, NULL, "step_ms"), 10.0);
    NEAR(num(s, NULL, NULL, "busy_ms"), (4.0 + 1.0 + 0.5 + 3.0) / 2);  /* the union */
    NEAR(num(s, NULL, NULL, "kernel_ms"), (3.0 + 2.0 + 1.0 + 0.5 + 3.0) / 2);
    NEAR(num(s, NULL, NULL, "gap_ms"), 10.0 - 4.25);
    NEAR(num(s, NULL, NULL, "gap_pct"), 57.5);
    /* idle inside the window: 1 ms, 5 ms and 0.5 ms; the edges 1 ms and 4 ms */
    NEAR(num(s, "idle", "over_50us", "ms"), 6.5 / 2);
    NEAR(num(s, "idle", "over_50us", "count"), 1.5);
    NEAR(num(s, "idle", "under_5us", "ms"), 0.0);
    NEAR(num(s, "idle", NULL, "edges_ms"), 5.0 / 2);
    NEAR(num(s, "families", "matmul", "ms"), 4.0);
    NEAR(num(s, "families", "matmul", "pct"), 40.0);
    NEAR(num(s, "families", "matmul", "calls"), 1.5);
    NEAR(num(s, "families", "attn_fwd", "ms"), 0.5);
    NEAR(num(s, "families", "copy_memset", "ms"), 0.25);
    NEAR(num(s, "families", "other", "ms"), 0.0);
    assert_int_equal(json_object_size(json_object_get(s, "families")), MS_KF_N);
    const json_t *top = json_object_get(s, "top");
    assert_int_equal(json_array_size(top), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(top, 0), "family")), "matmul");
    assert_string_equal(json_string_value(json_object_get(json_array_get(top, 1), "family")), "attn_fwd");
    json_decref(s);

    /* a window clips: [4 ms, 14 ms) keeps 1 ms of the second GEMM, the
     * attention kernel, the copy and 1 ms of the third GEMM */
    s = ms_ktimes_summary(&k, 1, 4000000, 14000000, 0, 0);
    NEAR(num(s, NULL, NULL, "step_ms"), 10.0);
    NEAR(num(s, NULL, NULL, "busy_ms"), 1.0 + 1.0 + 0.5 + 1.0);
    NEAR(num(s, "families", "matmul", "ms"), 2.0);
    assert_int_equal(json_array_size(json_object_get(s, "top")), 0);
    json_decref(s);

    /* no window: the given wall time, else the events' span */
    s = ms_ktimes_summary(&k, 1, 0, 0, 30000000, 0);
    NEAR(num(s, NULL, NULL, "step_ms"), 30.0);
    NEAR(num(s, "families", "other", "ms"), 1.0);
    json_decref(s);
    s = ms_ktimes_summary(&k, 1, 0, 0, 0, 0);
    NEAR(num(s, NULL, NULL, "step_ms"), 25.0);
    json_decref(s);
    assert_null(ms_ktimes_summary(&k, 0, 0, 0, 0, 0));
    ms_ktimes_free(&k);

    ms_ktimes_init(&k); /* nothing recorded: zeros, no division by zero */
    s = ms_ktimes_summary(&k, 3, 0, 0, 0, 5);
    NEAR(num(s, NULL, NULL, "step_ms"), 0.0);
    NEAR(num(s, NULL, NULL, "gap_pct"), 0.0);
    json_decref(s);
    ms_ktimes_free(&k);
}

/* Idle stretches by length: 2 us, 3 us, 20 us and 80 us between five 10 us
 * kernels of one step of 200 us. */
static void test_idle_buckets(void **st)
{
    (void)st;
    ms_ktimes k;
    ms_ktimes_init(&k);
    const uint64_t at[] = { 10000, 22000, 35000, 65000, 155000 };
    for (int i = 0; i < 5; i++) assert_int_equal(ms_ktimes_add(&k, "_Z1kv", at[i], at[i] + 10000), 0);
    json_t *s = ms_ktimes_summary(&k, 1, 0, 200000, 0, 0);
    assert_non_null(s);
    NEAR(num(s, "idle", "under_5us", "ms"), 0.005);
    NEAR(num(s, "idle", "under_5us", "count"), 2);
    NEAR(num(s, "idle", "5_to_50us", "ms"), 0.020);
    NEAR(num(s, "idle", "5_to_50us", "count"), 1);
    NEAR(num(s, "idle", "over_50us", "ms"), 0.080);
    NEAR(num(s, "idle", "over_50us", "count"), 1);
    NEAR(num(s, NULL, NULL, "gap_ms"), 0.150);
    NEAR(num(s, "idle", NULL, "edges_ms"), 0.150 - 0.105); /* 10 us before, 35 us after */
    json_decref(s);
    ms_ktimes_free(&k);
}

static void test_event_file_round_trip(void **st)
{
    (void)st;
    ms_ktimes k, r;
    ms_ktimes_init(&k);
    ms_ktimes_init(&r);
    fill(&k);
    json_t *f = ms_ktimes_events_json(&k, 2, 20000000);
    char *text = json_dumps(f, 0);
    json_decref(f);
    json_error_t je;
    f = json_loads(text, 0, &je);
    free(text);
    int steps = 0;
    uint64_t wall = 0;
    char err[256];
    assert_int_equal(ms_ktimes_read_json(&r, f, &steps, &wall, err, sizeof err), 0);
    json_decref(f);
    assert_int_equal(steps, 2);
    assert_int_equal((int)wall, 20000000);
    assert_int_equal(r.n, k.n);
    assert_int_equal(r.n_names, k.n_names);
    for (int i = 0; i < k.n; i++) {
        assert_string_equal(r.names[r.ev[i].name], k.names[k.ev[i].name]);
        assert_true(r.ev[i].start_ns == k.ev[i].start_ns && r.ev[i].end_ns == k.ev[i].end_ns);
    }
    ms_ktimes_free(&r);
    ms_ktimes_free(&k);

    /* what Python writes: reals for big ns values are taken; bad rows are refused */
    ms_ktimes_init(&r);
    f = json_loads("{\"steps\": 1, \"wall_ns\": 5e6, \"names\": [\"a\", \"b\"],"
                   " \"events\": [[0, 1.0e12, 1.000001e12], [1, 7, 9]]}", 0, &je);
    assert_int_equal(ms_ktimes_read_json(&r, f, &steps, &wall, err, sizeof err), 0);
    assert_int_equal(r.n, 2);
    assert_int_equal((int)wall, 5000000);
    assert_true(r.ev[0].end_ns - r.ev[0].start_ns == 1000000);
    json_decref(f);
    const char *bad[] = {
        "[]", "{\"names\": [\"a\"]}", "{\"names\": [\"a\"], \"events\": [[1, 0, 5]]}",
        "{\"names\": [\"a\"], \"events\": [[0, -1, 5]]}", "{\"names\": [3], \"events\": []}",
        "{\"names\": [\"a\"], \"events\": [[0, 1]]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        f = json_loads(bad[i], 0, &je);
        assert_non_null(f);
        err[0] = 0;
        assert_int_equal(ms_ktimes_read_json(&r, f, &steps, &wall, err, sizeof err), -1);
        assert_true(strlen(err) > 0);
        json_decref(f);
    }
    ms_ktimes_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classify_real_names),
        cmocka_unit_test(test_family_names),
        cmocka_unit_test(test_summary_window),
        cmocka_unit_test(test_idle_buckets),
        cmocka_unit_test(test_event_file_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
