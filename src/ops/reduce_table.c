/*
** ops/reduce_table.c: the reductions' rows as data for the code generator,
** and the map from op ids onto rows with their argument positions (see
** ops/reduce_table.h).
*/
#include "ops/reduce_table.h"

#include "ops/opdef.h"

#define KN_RED(K, nm, init_, iinit_, better_, ibetter_, prep_, comb_, icomb_, fin_, A, S, NAN_, \
               col)                                                                         \
  [KN__RED_##K] = {.kind = KN__RED_##K,                                                     \
                   .kname = #K,                                                             \
                   .name = nm,                                                              \
                   .init = init_,                                                           \
                   .iinit = iinit_,                                                         \
                   .init_text = #init_,                                                     \
                   .better = #better_,                                                      \
                   .prep = #prep_,                                                          \
                   .combine = #comb_,                                                       \
                   .finalize = #fin_,                                                       \
                   .acc = KN__RACC_##A,                                                     \
                   .shape = KN__RSHAPE_##S,                                                 \
                   .nan = KN__RNAN_##NAN_,                                                  \
                   .ordered = sizeof #better_ > sizeof "(false)",                           \
                   .columns = col},
const kn__red_row kn__red_rows[KN__RED_COUNT] = {
#include "ops/reduce_table.def"
};
#undef KN_RED

double kn__red_finalize(kn__red_kind k, double acc, double n, double corr) {
  switch (k) {
#define KN_RED(K, ...) \
  case KN__RED_##K: return kn__red_fin_##K(acc, n, corr);
#include "ops/reduce_table.def"
#undef KN_RED
  default: return acc;
  }
}

/* Ops onto rows: row, dims, one dim?, keepdim, dtype, correction. */
#define R(K) &kn__red_rows[KN__RED_##K]
static const struct {
  int op;
  kn__red_use use;
} uses[] = {
    {KN_OP_SUM, {R(SUM), -1, false, -1, 1, -1}},
    {KN_OP_SUM_DIM, {R(SUM), 1, false, 2, 3, -1}},
    {KN_OP_MEAN, {R(MEAN), -1, false, -1, 1, -1}},
    {KN_OP_MEAN_DIM, {R(MEAN), 1, false, 2, 3, -1}},
    {KN_OP_PROD, {R(PROD), -1, false, -1, 1, -1}},
    {KN_OP_PROD_DIM, {R(PROD), 1, true, 2, 3, -1}},
    {KN_OP_AMAX, {R(MAX), 1, false, 2, -1, -1}},
    {KN_OP_AMIN, {R(MIN), 1, false, 2, -1, -1}},
    {KN_OP_ARGMAX, {R(ARGMAX), 1, true, 2, -1, -1}},
    {KN_OP_ARGMIN, {R(ARGMIN), 1, true, 2, -1, -1}},
    {KN_OP_VAR, {R(VAR), 1, false, 3, -1, 2}},
    {KN_OP_STD, {R(STD), 1, false, 3, -1, 2}},
};
#undef R

const kn__red_use *kn__red_for_op(int op) {
  for (size_t i = 0; i < sizeof uses / sizeof uses[0]; i++)
    if (uses[i].op == op) return &uses[i].use;
  return NULL;
}
