/* See faults.h. */
#define _GNU_SOURCE
#include "faults.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

static const int guarded[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
static struct sigaction before[NSIG]; /* each guarded signal's action before the guard */

static void guard(int signum, siginfo_t *info, void *context)
{
    (void)context;
    if (info->si_code <= 0)
        return; /* sent, not raised by a fault: dropped */
    /* A real fault: the instruction runs again once this returns, under the action put back. */
    sigaction(signum, &before[signum], NULL);
}

int pk_guard_faults(void)
{
    struct sigaction action, current;
    size_t i;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = guard;
    /* On faulthandler's alternate stack where it made one: a stack overflow still reaches it. */
    action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&action.sa_mask);
    for (i = 0; i < sizeof guarded / sizeof guarded[0]; i++) {
        int signum = guarded[i];
        /* Set and read the action before in one call: the guard drops only a sent signal, as
         * an ignored one is, and a real fault under it puts back the action it read. */
        if (sigaction(signum, &action, &current) != 0)
            return -errno;
        if (current.sa_flags & SA_SIGINFO && current.sa_sigaction == guard)
            continue; /* guarded already: ``before`` holds the action before the first guard */
        before[signum] = current;
        if (!(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_IGN &&
            sigaction(signum, &current, NULL) != 0)
            return -errno; /* ignored: left so (a fault ends the process then anyway) */
    }
    return 0;
}
