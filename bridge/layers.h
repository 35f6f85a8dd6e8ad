/* layers.h — which module list of a program holds its repeated blocks.
 *
 * The Python side describes the module tree, one module per line, in
 * registration order (the root first), tab-separated:
 *     index  parent  path  type  is_list  param_bytes  signature
 * (parent -1 for the root; is_list 1 for nn.ModuleList / nn.Sequential;
 * param_bytes of the module's whole subtree; signature a digest of the
 * module's class and its parameters', buffers' and children's shapes and
 * dtypes, recursively, so identical blocks have equal signatures).
 *
 * Contract: msb_pick_layers chooses the list with the most children whose
 * signatures are all equal (at least 2 children); ties go to more parameter
 * bytes, then to the first registered. With override non-empty, the module
 * at that path ("." for the root module) is the list (it must exist and have children; identical or
 * not). Returns the list's index and fills why ("model.layers: ModuleList of
 * 24 identical LlamaDecoderLayer (the longest such list)"), or -1 with why
 * saying what is wrong and naming the longest candidates. Pure C: no I/O. */
#ifndef MS_BRIDGE_LAYERS_H
#define MS_BRIDGE_LAYERS_H

#include <stddef.h>

int msb_pick_layers(const char *tree_tsv, const char *override, char *why, size_t whylen);

/* The program's fingerprint: "fnv64:" + 16 hex digits of FNV-1a over each
 * module's path, type and signature (the tree's other fields are left out,
 * so parameter values and call order do not change it). 0, or -1 when out
 * is too small (MS_FINGERPRINT_MAX bytes suffice). */
int msb_fingerprint(const char *tree_tsv, char *out, size_t outlen);

#endif
