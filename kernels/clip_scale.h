/* clip_scale.h — AdamW's gradient multiplier from gradient statistics
 * records (ops.h's clip_scale), one function for both backends: the CPU
 * twin calls it, and so does the CUDA kernel (one thread), so that the
 * multiplier and the skip decision made on the device are the host's to
 * the bit; trainer/optimizer.c uses it on the host too, for the norm it
 * reports and, over several devices, for the step itself (a double sum in
 * record order, a double square root and divisions, rounded to float last). */
#ifndef MS_KERNELS_CLIP_SCALE_H
#define MS_KERNELS_CLIP_SCALE_H

#include <math.h>

#include "kernels/ops.h"

#ifdef __CUDACC__
#define MS_CLIP_HD __host__ __device__
#else
#define MS_CLIP_HD
#endif

/* out[0] = clip / loss_scale, out[1] = 1 (apply) or 0 (skip); see ops.h.
 * Returns the unscaled global norm (which the host reports). */
static inline MS_CLIP_HD double ms_clip_scale_of(float *out, const ms_grad_stat *stats, int n, float loss_scale,
                                               float grad_clip)
{
    double sumsq = 0;
    long long bad = 0;
    for (int i = 0; i < n; i++) {
        sumsq += stats[i].sumsq;
        bad += stats[i].nonfinite;
    }
    double scale = loss_scale, norm = sqrt(sumsq) / scale;
    float clip = grad_clip > 0 && norm > grad_clip ? (float)(grad_clip / norm) : 1.0f;
    out[0] = clip / (float)scale;
    out[1] = bad == 0 && isfinite(norm) ? 1.0f : 0.0f;
    return norm;
}

#endif
