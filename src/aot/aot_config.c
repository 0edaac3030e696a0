/*
** aot/aot_config.c: the AOT settings of a compile (kiln's counterpart of
** torch._functorch.config): the partitioner, chosen by the backend
** (kn__aot_config.partitioner) unless the process-wide setting
** KILN_AOT_PARTITIONER ("default" or "min_cut") says otherwise, and the
** settings' text (the torch._functorch.config artifact, part of the AOT
** cache key).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aot/aot.h"
#include "core/error.h"
#include "logging/log.h"

kn__aot_partitioner kn__aot_partitioner_resolve(const kn__aot_config *cfg, const char **from) {
  const char *v = getenv("KILN_AOT_PARTITIONER");
  if (from) *from = "backend";
  if (!v || !*v) return cfg->partitioner;
  bool mincut = !strcmp(v, "min_cut"), dflt = !strcmp(v, "default");
  if (!mincut && !dflt) {
    KN_LOG(KN_LOG_AOT, KN_WARNING,
           "KILN_AOT_PARTITIONER: expected 'default' or 'min_cut', got '%s'; using the "
           "backend's partitioner (%s)", v, kn__aot_partitioner_name(cfg->partitioner));
    return cfg->partitioner;
  }
  if (from) *from = "KILN_AOT_PARTITIONER";
  return mincut ? KN__AOT_PART_MINCUT : KN__AOT_PART_DEFAULT;
}

char *kn__aot_config_text(kn__aot_partitioner p, const char *from) {
  char buf[512];
  int n = snprintf(buf, sizeof buf,
                   "autograd_cache = True\n"
                   "functionalize = True\n"
                   "partitioner = '%s'\n"
                   "partitioner_from = '%s'\n"
                   "symbolic_joint_graphs = True\n",
                   kn__aot_partitioner_name(p), from);
  char *s = n > 0 ? strdup(buf) : NULL;
  if (!s) kn__oom();
  return s;
}
