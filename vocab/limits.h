/* limits.h — the sizes memsplit accepts, one rule for every command, file
 * format and module, changed here and nowhere else.
 *
 * Contract:
 *  - devices: a plan may list up to MS_MAX_DEVICES (plan and doctor --gpus,
 *    --gpu-mem and --devices lists, the plan JSON's devices);
 *  - stages: a pipeline has up to MS_MAX_STAGES (the planner never makes
 *    more, plan --max-stages, the plan JSON's stages, the trainer); training
 *    with a plan opens only the devices that hold a stage, so a plan of 1024
 *    devices trains when it uses at most 64 of them;
 *  - layers: a model has up to MS_MAX_LAYERS in its layer list, embedding
 *    and head included, so model.n_layer (blocks) is at most
 *    MS_MAX_LAYERS - 2.
 * Why these: a stage is a host thread and a set of buffers on its device;
 * 1024 devices keep the planner's search exact within its state budget. */
#ifndef MS_LIMITS_H
#define MS_LIMITS_H

#define MS_MAX_DEVICES 1024
#define MS_MAX_STAGES 64
#define MS_MAX_LAYERS 4096
#define MS_MAX_BLOCKS (MS_MAX_LAYERS - 2)

#endif
