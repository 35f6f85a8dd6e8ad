/* launch_check.h — refusing a launch that does not match its plan, before
 * anything is allocated: every rank runs the same checks on the same
 * gathered facts, so every rank refuses with the same message.
 *
 * Contract (collective; 0, or -1 with the message in err):
 *  - ms_launch_check_size(): the run has exactly the plan's p * d ranks.
 *  - ms_launch_device(): the device a rank trains on: --device as given,
 *    else GPU <rank on its node> when the node has GPUs, else the CPU.
 *  - ms_launch_check_claims(): no two ranks claim one GPU. A claim is the
 *    host name and the GPU's PCI bus id (or, where no GPU is visible, the
 *    device name asked for), so CUDA_VISIBLE_DEVICES remappings are seen
 *    through; the CPU backend claims nothing (its ranks share the CPU). */
#ifndef MS_LAUNCH_CHECK_H
#define MS_LAUNCH_CHECK_H

#include <stddef.h>

#include "vocab/plan.h"

int ms_launch_check_size(const ms_plan *plan, char *err, size_t errlen);
void ms_launch_device(const char *asked, char *out, size_t len);
int ms_launch_check_claims(const char *device, char *err, size_t errlen);

#endif
