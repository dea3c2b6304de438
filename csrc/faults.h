/* processkit native faults: the runner service survives a fault signal sent by ``kill``.
 *
 * A child of a run has the service as its parent, and ``kill -SEGV $PPID`` (or SIGBUS, SIGFPE,
 * SIGILL) ended the service with every run in flight. A Python handler cannot take these: it
 * runs later, so a real fault would return to its faulting instruction and raise it again for
 * good. This handler, in C, tells the two apart by ``si_code``: one sent (SI_USER, SI_QUEUE,
 * SI_TKILL: ``si_code`` <= 0, which no process can forge above 0 for another) is dropped; a real
 * fault puts back the action found before the guard (the default, or faulthandler's) and returns,
 * so the fault repeats under it and ends the process as it did. */
#ifndef PROCESSKIT_FAULTS_H
#define PROCESSKIT_FAULTS_H

/* Guard SIGSEGV, SIGBUS, SIGFPE and SIGILL, each unless it is ignored (a fault ends the process
 * then anyway) or guarded already. Returns 0, or -errno of the ``sigaction`` that failed. */
int pk_guard_faults(void);

#endif
