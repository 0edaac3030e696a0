/*
** core/cputarget.h: the CPU that compiled code is made for, as one token.
**
** kiln compiles generated code with -march=native by default, so a shared
** object is only good on a CPU with the same instruction set. The target
** names this CPU: on x86-64 "x86_64-<vendor>-<family>.<model>-" and the
** CPUID feature words kiln and the compiler dispatch on (leaf 1 ECX/EDX,
** leaf 7 EBX/ECX/EDX and subleaf 1 EAX, leaf 0x80000001 ECX/EDX) with the
** register state the OS enables (XCR0); on AArch64 the hwcap words; else
** the machine name. Characters: [A-Za-z0-9._-]. It is part of the code
** cache's keys and of each .meta (docs/INDUCTOR.md).
*/
#ifndef KN_CORE_CPUTARGET_H
#define KN_CORE_CPUTARGET_H

/* The target of the CPU this process runs on (a constant string, computed
** once). */
const char *kn__cpu_target(void);

#endif
