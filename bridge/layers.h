/* layers.h — the units a program is split into, from its module tree, and
 * the program's fingerprint.
 *
 * The Python side describes the module tree, one module per line, in
 * registration order (the root first), tab-separated:
 *     index  parent  path  type  is_list  param_bytes  signature
 * (parent -1 for the root; is_list 1 for nn.ModuleList, nn.ModuleDict and
 * nn.Sequential; param_bytes of the module's whole subtree; signature a
 * digest of the module's class and its parameters', buffers' and
 * children's shapes and dtypes, recursively, so identical modules have
 * equal signatures). Pure C: no I/O. */
#ifndef MS_BRIDGE_LAYERS_H
#define MS_BRIDGE_LAYERS_H

#include <stddef.h>

/* The units a program is split into: a cut of the module tree, chosen
 * from the tree and the parameter bytes alone (no rule about a kind of
 * model). Starting at the root, a module with children is opened (its
 * children take its place) while it holds more than an eighth of the
 * model's parameter bytes; a module that is one of at least four identical
 * siblings (a run of blocks) only past a quarter. The root is always
 * opened. Modules that are not opened are units; a unit with no parameters
 * and no children (an activation, a pooling, a dropout) joins the unit
 * registered before it under the same parent, else the one after it. A
 * module opened into a single unit (its one child with parameters and its
 * activation) is closed again: it is that unit, under its own name.
 *
 * layers (comma-separated module paths, "." the root; may be NULL or ""):
 * each named module is opened (and its ancestors), and its children are
 * units whatever their size, unless named too.
 *
 * unit_of gets, for each of the tree's modules (at most cap), the unit it
 * heads (0, 1, ... in registration order) or -1 (not a unit's top module:
 * inside a unit, or opened). Returns the number of units (why: "12 units
 * from the module tree: ..."), 0 when the model cannot be split (a single
 * module with nothing to open; why says so), or -1 with why (a malformed
 * tree, a --layers path that is not there or has no children, more modules
 * than cap). */
int msb_pick_units(const char *tree_tsv, const char *layers, int *unit_of, int cap, char *why, size_t whylen);

/* The program's fingerprint: "fnv64:" + 16 hex digits of FNV-1a over each
 * module's path, type and signature (the tree's other fields are left out,
 * so parameter values and call order do not change it). 0, or -1 when out
 * is too small (MS_FINGERPRINT_MAX bytes suffice). */
int msb_fingerprint(const char *tree_tsv, char *out, size_t outlen);

#endif
