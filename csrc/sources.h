/* processkit native sources: the launcher's check of its byte-code bundle's sources in one call.
 *
 * Each of the ~70 rows a run preloads is used only while its source's mtime, size and status-change
 * time are as the row recorded (processkit/cli/quickimport.py). Asked one ``os.stat`` at a time,
 * that is ~2.6 us a source, most of it the ``stat_result`` each call builds (its float times); here
 * it is the system calls alone, the figures read out of one array. */
#ifndef PROCESSKIT_SOURCES_H
#define PROCESSKIT_SOURCES_H

#include <stddef.h>

/* ``stat`` of each of ``count`` NUL-separated paths in ``paths``; for the i-th, ``out[4 * i]``
 * onward: its mtime's seconds and nanoseconds, its size, its status-change time in nanoseconds;
 * all four -1 where it cannot be read. */
void pk_source_states(const char *paths, size_t count, long long *out);

#endif
