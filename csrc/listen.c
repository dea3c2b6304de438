/* See listen.h. */
#define _GNU_SOURCE
#include "listen.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int pk_listen_unix(const char *path, int backlog)
{
    struct sockaddr_un address;
    size_t length = strlen(path);
    if (length >= sizeof(address.sun_path)) {
        return -ENAMETOOLONG;
    }
    memset(&address, 0, sizeof(address));
    address.sun_family = AF_UNIX;
    memcpy(address.sun_path, path, length);

    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    if (bind(fd, (const struct sockaddr *)&address, sizeof(address)) != 0) {
        int error = errno;
        close(fd);
        return -error;
    }
    (void)chmod(path, 0600);
    if (listen(fd, backlog) != 0) {
        int error = errno;
        close(fd);
        return -error;
    }
    return fd;
}
