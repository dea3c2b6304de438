"""cffi (API mode) build of ``processkit._native`` from pump.c, hasher.c, stay.c, sha256.c, spawn.c, spawn_cow.c, spawn_report.c, spawn_child.c, listen.c, sources.c, faults.c and umask.c; used by setup.py."""

import os

import cffi

# setuptools rejects absolute source paths; pip runs this from the project root.
HERE = os.path.relpath(os.path.dirname(os.path.abspath(__file__)))

ffibuilder = cffi.FFI()
ffibuilder.cdef(
    """
    typedef struct pk_sha256 { ...; } pk_sha256;

    typedef struct pk_stream {
        uint64_t seen;
        uint64_t written;
        uint64_t ring_from;
        int write_error;
        int no_splice;
        size_t rest_len;
        unsigned char *buf;
        size_t ring_size;
        int threaded;
        int wants_thread;
        uint64_t *marks;
        ...;
    } pk_stream;

    typedef struct pk_drain_result {
        uint64_t total;
        size_t last_at;
        size_t last;
        size_t echoed;
        int eof;
        int read_errno;
        int echo_errno;
        int echo_last;
    } pk_drain_result;

    pk_stream *pk_stream_new(int in_fd, int capture_fd, uint64_t cap, uint64_t head, size_t buf_size, int hash_thread);
    void pk_stream_free(pk_stream *stream);
    #define PK_ECHO_SEND ...
    #define PK_ECHO_SPLICE ...
    void pk_stream_drain(pk_stream *stream, int echo_fd, int echo_mode, uint64_t budget, int until_empty, pk_drain_result *result);
    void pk_stream_digest(pk_stream *stream, unsigned char out[32]);
    int pk_stream_store_rest(pk_stream *stream);
    int pk_stream_watch(pk_stream *stream, int watch_fd, int event_fd);
    void pk_stream_arm(pk_stream *stream);
    void pk_stream_unwatch(pk_stream *stream);
    typedef struct pk_stay_counts {
        uint64_t drains;
        uint64_t waits;
        uint64_t gathers;
    } pk_stay_counts;
    void pk_stream_stay(pk_stream *stream, int echo_fd, int echo_mode, uint64_t budget, int epoll_fd, int64_t until, uint64_t stop_at, uint64_t full_at, int64_t shortest_pause_ns, int64_t longest_pause_ns, pk_drain_result *result, pk_stay_counts *counts);

    void pk_sha256_init(pk_sha256 *ctx);
    void pk_sha256_update(pk_sha256 *ctx, const unsigned char *data, size_t len);
    void pk_sha256_final(const pk_sha256 *ctx, unsigned char out[32]);
    int pk_sha256_accelerated(void);

    #define PK_SPAWN_OK ...
    #define PK_SPAWN_CLONE ...
    #define PK_SPAWN_PGID ...
    #define PK_SPAWN_JOIN ...
    #define PK_SPAWN_STDIO ...
    #define PK_SPAWN_CHDIR ...
    #define PK_SPAWN_EXEC ...

    typedef struct pk_spawn_request {
        char *const *paths;
        size_t path_count;
        char *const *argv;
        char *const *envp;
        const char *cwd;
        int stdio[3];
        int cgroup_fd;
        int cgroup_procs_fd;
        const int *join_fds;
        size_t join_count;
        const int *pass_fds;
        size_t pass_count;
        int controlling_tty;
        unsigned long long nofile_soft;
        const unsigned long long *limits;
        size_t limit_count;
        int linger_ms;
        int own_memory;
        int cwd_fd;
    } pk_spawn_request;

    typedef struct pk_spawn_result {
        int pid;
        int pidfd;
        int stage;
        int error;
        long long start_ns;
        long long join_ns;
    } pk_spawn_result;

    typedef struct pk_spawn_pending pk_spawn_pending;
    pk_spawn_pending *pk_spawn_begin(const pk_spawn_request *request, pk_spawn_result *result);
    int pk_spawn_report_fd(pk_spawn_pending *pending);
    #define PK_SPAWN_HELD_POLL_MS ...
    #define PK_SPAWN_UNTIL_SIGNAL ...
    int pk_spawn_finish(pk_spawn_pending *pending, pk_spawn_result *result, int wait, int signal_fd);
    void pk_spawn_free(pk_spawn_pending *pending);
    int pk_spawn_shared_memory(void);

    int prctl(int, unsigned long, unsigned long, unsigned long, unsigned long);

    // libc's getrusage and wait4: a run reads its usage without loading the resource module
    typedef int... time_t;
    typedef int... suseconds_t;
    struct timeval { time_t tv_sec; suseconds_t tv_usec; ...; };
    struct rusage { struct timeval ru_utime; struct timeval ru_stime; long ru_maxrss; long ru_inblock; long ru_oublock; ...; };
    #define RUSAGE_CHILDREN ...
    int getrusage(int, struct rusage *);
    int wait4(int, int *, int, struct rusage *);

    int pk_listen_unix(const char *path, int backlog);

    // libc's mmap and munmap: the launcher maps its byte-code bundle without loading the mmap module
    #define PROT_READ ...
    #define MAP_PRIVATE ...
    typedef int... off_t;
    void *mmap(void *, size_t, int, int, int, off_t);
    int munmap(void *, size_t);

    // libc's flock and fcntl: a run's locks (its stream's: an open file description's, F_OFD_SETLK)
    // and its pipes' size without loading the fcntl module
    #define LOCK_EX ...
    #define LOCK_NB ...
    #define F_SETPIPE_SZ ...
    #define F_OFD_SETLK ...
    #define F_WRLCK ...
    #define F_UNLCK ...
    #define SEEK_SET ...
    struct flock { short l_type; short l_whence; off_t l_start; off_t l_len; ...; };
    int flock(int, int);
    int fcntl(int, int, ...);

    void pk_source_states(const char *paths, size_t count, long long *out);

    int pk_guard_faults(void);

    unsigned int pk_umask_now(void);
    """
)
ffibuilder.set_source(
    "processkit._native",
    '#include <fcntl.h>\n#include <sys/file.h>\n#include <sys/mman.h>\n#include <sys/prctl.h>\n#include <sys/resource.h>\n#include <sys/wait.h>\n#include "pump.h"\n#include "spawn.h"\n#include "listen.h"\n#include "sources.h"\n#include "faults.h"\n#include "umask.h"',
    sources=[
        os.path.join(HERE, name)
        for name in (
            "pump.c",
            "hasher.c",
            "stay.c",
            "sha256.c",
            "spawn.c",
            "spawn_cow.c",
            "spawn_report.c",
            "spawn_child.c",
            "listen.c",
            "sources.c",
            "faults.c",
            "umask.c",
        )
    ],
    include_dirs=[HERE],
    depends=[
        os.path.join(HERE, name)
        for name in (
            "pump.h",
            "hasher.h",
            "sha256.h",
            "spawn.h",
            "spawn_child.h",
            "listen.h",
            "sources.h",
            "faults.h",
            "umask.h",
        )
    ],
    extra_compile_args=["-O3", "-std=gnu11", "-Wall", "-Wextra", "-pthread"],
    extra_link_args=["-pthread"],
)
