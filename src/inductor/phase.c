/*
** inductor/phase.c: compile-phase timing. Each phase (compile_fx_inner around
** a whole compile; inductor_lowering, inductor_scheduling, inductor_codegen,
** inductor_cc, inductor_load inside it) is a chromium B/E pair in the trace
** and an entry of kn_dump_compile_times. The calling thread also sums them
** for the frame's compilation_metrics: the whole compile into
** inductor_cumulative_compile_time_us, codegen + cc + load into
** inductor_code_gen_cumulative_compile_time_us (kn__ind_times_take).
*/
#include <string.h>
#include <time.h>

#include "inductor/inductor.h"
#include "logging/log.h"
#include "trace/events.h"
#include "trace/trace.h"

static _Thread_local double tls_total_us, tls_codegen_us;

static double mono_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void kn__ind_phase_begin(kn__ind_phase *ph, const char *name) {
  ph->name = name;
  ph->t0 = mono_s();
  if (kn__trace_enabled()) (void)kn__trace_chromium_event(name, 'B', -1, NULL, NULL);
}

double kn__ind_phase_end(kn__ind_phase *ph) {
  double s = mono_s() - ph->t0;
  if (kn__trace_enabled()) (void)kn__trace_chromium_event(ph->name, 'E', -1, NULL, NULL);
  kn__compile_time_record(ph->name, s);
  if (!strcmp(ph->name, "compile_fx_inner")) tls_total_us += s * 1e6;
  else if (!strcmp(ph->name, "inductor_codegen") || !strcmp(ph->name, "inductor_cc") ||
           !strcmp(ph->name, "inductor_load"))
    tls_codegen_us += s * 1e6;
  return s;
}

void kn__ind_times_take(double *total_us, double *codegen_us) {
  if (total_us) *total_us = tls_total_us;
  if (codegen_us) *codegen_us = tls_codegen_us;
  tls_total_us = tls_codegen_us = 0;
}
