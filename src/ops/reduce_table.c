/*
** ops/reduce_table.c: the reductions' rows as data for the code generator,
** and the map from op ids onto rows with their argument positions (see
** ops/reduce_table.h).
*/
#include "ops/reduce_table.h"

#include "ops/opdef.h"

#define KN_RED(K, nm, init_, iinit_, better_, ibetter_, prep_, comb_, icomb_, fin_, A, S, NAN_, \
               col, PRE)                                                                    \
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
                   .columns = col,                                                          \
                   .prepped = sizeof #prep_ != sizeof "(x)",                                \
                   .pre = KN__RED_##PRE},
const kn__red_row kn__red_rows[KN__RED_COUNT] = {
#include "ops/reduce_table.def"
};
#undef KN_RED

double kn__red_finalize(kn__red_kind k, double acc, double n, double corr, double c) {
  switch (k) {
#define KN_RED(K, ...) \
  case KN__RED_##K: return kn__red_fin_##K(acc, n, corr, c);
#include "ops/reduce_table.def"
#undef KN_RED
  default: return acc;
  }
}

/* Ops onto rows: row, dims, one dim?, keepdim, dtype, correction, ord. */
#define R(K) &kn__red_rows[KN__RED_##K]
static const struct {
  int op;
  kn__red_use use;
} uses[] = {
    {KN_OP_SUM, {R(SUM), -1, false, -1, 1, -1, -1}},
    {KN_OP_SUM_DIM, {R(SUM), 1, false, 2, 3, -1, -1}},
    {KN_OP_MEAN, {R(MEAN), -1, false, -1, 1, -1, -1}},
    {KN_OP_MEAN_DIM, {R(MEAN), 1, false, 2, 3, -1, -1}},
    {KN_OP_PROD, {R(PROD), -1, false, -1, 1, -1, -1}},
    {KN_OP_PROD_DIM, {R(PROD), 1, true, 2, 3, -1, -1}},
    {KN_OP_AMAX, {R(MAX), 1, false, 2, -1, -1, -1}},
    {KN_OP_AMIN, {R(MIN), 1, false, 2, -1, -1, -1}},
    {KN_OP_ARGMAX, {R(ARGMAX), 1, true, 2, -1, -1, -1}},
    {KN_OP_ARGMIN, {R(ARGMIN), 1, true, 2, -1, -1, -1}},
    {KN_OP_VAR, {R(VAR), 1, false, 3, -1, 2, -1}},
    {KN_OP_STD, {R(STD), 1, false, 3, -1, 2, -1}},
    {KN_OP_ANY, {R(ANY), -1, true, -1, -1, -1, -1}},
    {KN_OP_ANY_DIM, {R(ANY), 1, true, 2, -1, -1, -1}},
    {KN_OP_ALL, {R(ALL), -1, true, -1, -1, -1, -1}},
    {KN_OP_ALL_DIM, {R(ALL), 1, true, 2, -1, -1, -1}},
    {KN_OP_LOGSUMEXP, {R(LSE), 1, false, 2, -1, -1, -1}},
    {KN_OP_VECTOR_NORM, {R(NORM2), 2, false, 3, 4, -1, 1}},
};
#undef R

const kn__red_use *kn__red_for_op(int op) {
  for (size_t i = 0; i < sizeof uses / sizeof uses[0]; i++)
    if (uses[i].op == op) return &uses[i].use;
  return NULL;
}

const kn__red_row *kn__red_norm_row(double ord) {
  kn__red_kind k = ord == 0    ? KN__RED_NORM0
                   : ord == 1  ? KN__RED_NORM1
                   : ord == 2  ? KN__RED_NORM2
                   : isinf(ord) ? (ord > 0 ? KN__RED_NORMINF : KN__RED_NORMNINF)
                                : KN__RED_NORMP;
  return &kn__red_rows[k];
}
