/* processkit native umask: a process's umask read without leaving it changed.
 *
 * POSIX reads the umask only by setting it (``umask`` returns the one it replaced), and the
 * runner service's caller reads its own at every call. From Python that is two calls, and a
 * second thread's read between them, or a signal handler raising between them, left the whole
 * process at the placeholder for good. Here the set and the restore are one C call, under a
 * mutex (cffi lets go of the GIL around the call: two threads can be inside at once), and no
 * Python code runs between them. */
#ifndef PROCESSKIT_UMASK_H
#define PROCESSKIT_UMASK_H

/* The process's umask; for the moment between the set and the restore it is 077. */
unsigned int pk_umask_now(void);

#endif
