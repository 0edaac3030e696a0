/*
** nodebug.c: a shared object built without debug info (-g0; see
** tests/CMakeLists.txt), whose frames libdw can name from the symbol table
** but give no file or line: test_symcache's partial frames.
*/
int kn_nodebug_twice(int x);

int kn_nodebug_twice(int x) { return 2 * x; }
