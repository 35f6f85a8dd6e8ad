/* replica_model.c — replicas and ZeRO-1 in the stage model (replica_model.h). */
#include "planner/replica_model.h"

#include <string.h>

uint64_t ms_zero_share(uint64_t optim_bytes, int d)
{
    if (d <= 1) return optim_bytes;
    uint64_t chunk = (optim_bytes + (uint64_t)d - 1) / (uint64_t)d;
    return (chunk + 255) / 256 * 256;
}

double ms_allreduce_ms(uint64_t bytes, int d, double bus_gbps)
{
    if (d <= 1) return 0;
    return 2.0 * (double)(d - 1) / (double)d * ms_transfer_ms(bytes, bus_gbps);
}

uint64_t ms_device_reserve(uint64_t reserve, uint64_t comm_reserve, int p, int d)
{
    return p * d > 1 ? ms_sat_add(reserve, comm_reserve) : reserve;
}

void ms_replica_costs(const ms_layer_cost *L, int n_layers, int d, int zero, double bus_gbps, ms_layer_cost *out)
{
    for (int l = 0; l < n_layers; l++) {
        out[l] = L[l];
        if (zero && d > 1) {
            out[l].optim = ms_zero_share(L[l].optim, d);
            out[l].opt_ms = L[l].opt_ms / d;
        }
        out[l].opt_ms += ms_allreduce_ms(L[l].grad, d, bus_gbps);
    }
}

void ms_stage_predict_replicas(const ms_layer_cost *L, int n_layers, int first, int last, int stage, int n_stages,
                               int schedule, int m, int recompute, uint64_t reserve, double link_gbps, int d,
                               int zero, double bus_gbps, uint64_t comm_reserve, ms_plan_stage *out)
{
    ms_stage_predict(L, n_layers, first, last, stage, n_stages, schedule, m, recompute,
                     ms_device_reserve(reserve, comm_reserve, n_stages, d), link_gbps, out);
    uint64_t grad = 0, optim = 0;
    double opt = 0;
    for (int l = first; l <= last && l < n_layers; l++) {
        grad += L[l].grad;
        optim += zero && d > 1 ? ms_zero_share(L[l].optim, d) : L[l].optim;
        opt += L[l].opt_ms;
    }
    /* the optimizer over a 1/d share, then one all-reduce of the stage's gradients */
    out->opt_ms = (zero && d > 1 ? opt / d : opt) + ms_allreduce_ms(grad, d, bus_gbps);
    out->bytes[MS_CAT_OPTIM] = optim;
    out->peak = 0;
    for (int c = 0; c < MS_CAT_N; c++) out->peak = ms_sat_add(out->peak, out->bytes[c]);
}
