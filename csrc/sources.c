/* See sources.h. */
#include "sources.h"

#include <string.h>
#include <sys/stat.h>

void pk_source_states(const char *paths, size_t count, long long *out)
{
    const char *path = paths;
    for (size_t index = 0; index < count; index++) {
        struct stat held;
        long long *state = out + 4 * index;
        if (stat(path, &held) == 0) {
            state[0] = (long long)held.st_mtim.tv_sec;
            state[1] = (long long)held.st_mtim.tv_nsec;
            state[2] = (long long)held.st_size;
            state[3] = (long long)held.st_ctim.tv_sec * 1000000000LL + held.st_ctim.tv_nsec;
        } else {
            state[0] = state[1] = state[2] = state[3] = -1;
        }
        path += strlen(path) + 1;
    }
}
