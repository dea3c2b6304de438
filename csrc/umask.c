/* See umask.h. */
#include "umask.h"

#include <pthread.h>
#include <sys/stat.h>

static pthread_mutex_t reading = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t registered = PTHREAD_ONCE_INIT;

static void hold(void)
{
    pthread_mutex_lock(&reading);
}

static void release(void)
{
    pthread_mutex_unlock(&reading);
}

/* A fork by another thread waits for a read under way: its child never starts at the
 * placeholder 077, nor with the mutex held (its first read would wait for ever). */
static void register_fork(void)
{
    pthread_atfork(hold, release, release);
}

unsigned int pk_umask_now(void)
{
    mode_t mask;
    pthread_once(&registered, register_fork);
    pthread_mutex_lock(&reading);
    mask = umask(077);
    umask(mask);
    pthread_mutex_unlock(&reading);
    return (unsigned int)mask;
}
