/* processkit native listen: the control socket made without Python's socket modules.
 *
 * Most runs never get a control client, yet every run listens. Importing ``_socket`` (hundreds
 * of constants built at import) costs every run's start-up more than the whole listen does, so
 * the runner makes its listening socket here and imports ``socket`` only to accept a client. */
#ifndef PROCESSKIT_LISTEN_H
#define PROCESSKIT_LISTEN_H

/* A non-blocking, close-on-exec AF_UNIX stream socket bound at ``path``, made 0600 (best effort:
 * the run's 0700 directory is the real gate) and listening with ``backlog``. Returns its fd, or
 * -errno of the step that failed; on failure nothing is left open (a socket file bound before
 * the failure is the caller's to remove). */
int pk_listen_unix(const char *path, int backlog);

#endif
