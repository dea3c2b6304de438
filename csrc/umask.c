/* See umask.h. */
#include "umask.h"

#include <pthread.h>
#include <sys/stat.h>

static pthread_mutex_t reading = PTHREAD_MUTEX_INITIALIZER;

unsigned int pk_umask_now(void)
{
    mode_t mask;
    pthread_mutex_lock(&reading);
    mask = umask(077);
    umask(mask);
    pthread_mutex_unlock(&reading);
    return (unsigned int)mask;
}
