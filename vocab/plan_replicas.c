/* plan_replicas.c — replicas, ZeRO-1 and rank placement in plan JSON
 * (plan_replicas.h). */
#include "vocab/plan_replicas.h"
#include "vocab/errf.h"
#include "vocab/json_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ms_plan_replicas_single(ms_plan *p)
{
    free(p->replica_devices);
    p->replicas = 1;
    p->zero = 0;
    p->replica_devices = calloc((size_t)(p->n_stages ? p->n_stages : 1), sizeof *p->replica_devices);
    if (!p->replica_devices) return -1;
    for (int s = 0; s < p->n_stages; s++) p->replica_devices[s] = p->stages[s].device;
    return 0;
}

int ms_plan_replicas_to_json(const ms_plan *p, json_t *root, char *err, size_t errlen)
{
    int d = p->replicas > 0 ? p->replicas : 1, bad = 0;
    bad |= json_object_set_new(root, "replicas", json_integer(d));
    bad |= json_object_set_new(root, "zero", json_boolean(p->zero));
    bad |= json_object_set_new(root, "bus_gbps", json_real(p->bus_gbps > 0 ? p->bus_gbps : MS_PLAN_DEFAULT_BUS_GBPS));
    bad |= json_object_set_new(root, "comm_reserve_bytes", ms_json_u64(p->comm_reserve));
    json_t *st = json_object_get(root, "stages");
    for (int s = 0; d > 1 && s < p->n_stages; s++) {
        json_t *a = json_array();
        for (int r = 0; a && r < d; r++) bad |= json_array_append_new(a, json_integer(p->replica_devices[s * d + r]));
        bad |= json_object_set_new(json_array_get(st, (size_t)s), "replica_devices", a);
    }
    return bad ? ms_errf(err, errlen, "plan: cannot write the replicas") : 0;
}

static int read_devices(const json_t *root, ms_plan *p, char *err, size_t errlen)
{
    const int d = p->replicas;
    const json_t *st = json_object_get(root, "stages");
    unsigned char *taken = calloc((size_t)p->n_devices, 1);
    if (!taken) return ms_errf(err, errlen, "out of memory");
    int rc = 0;
    for (int s = 0; s < p->n_stages && !rc; s++) {
        const json_t *a = json_object_get(json_array_get(st, (size_t)s), "replica_devices");
        if (!json_is_array(a) || json_array_size(a) != (size_t)d) {
            rc = ms_errf(err, errlen, "stages[%d].replica_devices: expected an array of the %d replicas' devices", s, d);
            break;
        }
        for (int r = 0; r < d && !rc; r++) {
            const json_t *v = json_array_get(a, (size_t)r);
            long long x = json_is_integer(v) ? json_integer_value(v) : -1;
            if (x < 0 || x >= p->n_devices)
                rc = ms_errf(err, errlen, "stages[%d].replica_devices[%d]: not a device index 0..%d", s, r, p->n_devices - 1);
            else if (r == 0 && x != p->stages[s].device)
                rc = ms_errf(err, errlen, "stages[%d].replica_devices[0]: %lld is not the stage's device %d", s, x,
                             p->stages[s].device);
            else if (taken[x])
                rc = ms_errf(err, errlen, "stages[%d].replica_devices[%d]: device %lld already runs a stage", s, r, x);
            else {
                taken[x] = 1;
                p->replica_devices[s * d + r] = (int)x;
            }
        }
    }
    free(taken);
    return rc;
}

int ms_plan_replicas_from_json(const json_t *root, ms_plan *p, char *err, size_t errlen)
{
    long long d = 1;
    if (json_object_get(root, "replicas") &&
        ms_json_get_int(root, "plan", "replicas", 1, MS_MAX_DEVICES, &d, err, errlen))
        return -1;
    if (d * p->n_stages > p->n_devices)
        return ms_errf(err, errlen, "plan.replicas: %lld replicas of %d stages need %lld devices; the plan has %d", d,
                       p->n_stages, d * p->n_stages, p->n_devices);
    if (p->n_micro % d)
        return ms_errf(err, errlen, "plan.n_micro: %d micro-batches per step do not split over %lld replicas", p->n_micro, d);
    p->replicas = (int)d;
    p->zero = 0;
    if (json_object_get(root, "zero") && ms_json_get_bool(root, "plan", "zero", &p->zero, err, errlen)) return -1;
    if (p->zero && d == 1) return ms_errf(err, errlen, "plan.zero: ZeRO-1 shards over replicas; this plan has one");
    p->bus_gbps = MS_PLAN_DEFAULT_BUS_GBPS;
    if (json_object_get(root, "bus_gbps") &&
        ms_json_get_num(root, "plan", "bus_gbps", 1e-9, 1e12, &p->bus_gbps, err, errlen))
        return -1;
    p->comm_reserve = 0;
    if (json_object_get(root, "comm_reserve_bytes") &&
        ms_json_get_u64(root, "plan", "comm_reserve_bytes", INT64_MAX, &p->comm_reserve, err, errlen))
        return -1;
    p->replica_devices = calloc((size_t)(p->n_stages * d), sizeof *p->replica_devices);
    if (!p->replica_devices) return ms_errf(err, errlen, "out of memory");
    if (d == 1) {
        for (int s = 0; s < p->n_stages; s++) p->replica_devices[s] = p->stages[s].device;
        return 0;
    }
    return read_devices(root, p, err, errlen);
}

int ms_plan_ranks(const ms_plan *p) { return p->n_stages * (p->replicas > 0 ? p->replicas : 1); }

int ms_plan_rank_device(const ms_plan *p, int rank, int *stage, int *replica)
{
    int d = p->replicas > 0 ? p->replicas : 1;
    if (rank < 0 || rank >= ms_plan_ranks(p)) return -1;
    int s = rank % p->n_stages, r = rank / p->n_stages;
    if (stage) *stage = s;
    if (replica) *replica = r;
    return p->replica_devices ? p->replica_devices[s * d + r] : p->stages[s].device;
}
